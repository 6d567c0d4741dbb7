"""Nothing crosses a simulated link that a real message would not carry.

Every message delivered during MeshHeal, SAC and CP-WBFT runs (fake backends,
and a MeshHeal run recorded from an HTTP endpoint then replayed) is walked
field by field against a whitelist per message kind. Truth — whether an
output is correct, the gold answer, the required abilities, a producer's
model, role, degraded or Byzantine status, observable-feature flags — has no
field to travel in; with fakes, a text is an opaque token that only a model
(a fake reading it) or the observer can interpret.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import meshsim
from meshsim.core.calls import TaskInfo
from meshsim.net.node import Node
from meshsim.protocols.execution import Output, TaskState

ROOT = Path(__file__).resolve().parents[2]

#: dict keys each message kind may carry (a real implementation's message fields)
KEYS = {
    "hello": {"abilities", "state", "probe_at"},
    "state": {"state", "probe_at"},
    "summary": {"type", "ability", "mu", "xbar", "n"},
    "review_req": {"mode", "n", "ctx", "own", "other", "explanations", "candidates", "id", "task", "abilities",
                   "action", "context_items", "output_text", "drafts", "producer"},
    "review_rep": {"id", "result"},
    "review_rep.result": {"scores", "score", "explanation", "text"},
    "sac": {"q", "t", "answer", "text"},
    "cpwbft": {"q", "t", "answer", "text", "conf"},
    # the MeshHeal paper's baselines (meshsim.protocols.baselines): answers are parsed,
    # opaque identifiers; an outcome is the sender's own judgment of an output
    "result": {"state", "output"},
    "feedback": {"task", "success"},
    "verdict": {"task", "abilities", "success"},  # RAPS (reactive): a watchdog tells a producer its verdict
    "status": {"counts"},  # AgentNet: [task type, executed, succeeded] rows an agent tells its neighbours
    "request": {"state"},
    "work": {"state", "ability", "action"},
    "work_done": {"task", "output"},
    "plan": {"state", "chain", "plan", "reps"},
    "plan_step": {"task", "plan", "step", "state", "output", "answer"},
    # Symphony's planners: the task goes out, the ability pair the planner inferred comes back
    "plan_req": {"task", "sample"},
    "plan_rep": {"task", "sample", "pair"},
    "sac_team": {"task", "round", "answer", "text"},
    "task_ack": {"task"},  # issue 34's end-to-end acknowledgement (e2e_ack), back along the route
}
#: dataclasses that may travel, and the fields they may have
TYPES = {
    TaskState: {"task", "R", "C", "Y", "P", "probe", "leg_hops", "visits", "actions"},
    TaskInfo: {"index", "id", "type", "question", "dataset", "choices"},
    Output: {"agent", "abilities", "action", "text", "replaced_by"},
}
#: a fake's text: an opaque token naming nothing but its task and a call seed
FAKE_TEXT = re.compile(r"^(|<fake \S+ [0-9a-f]{16}>)$")
TEXT_KEYS = {"text", "output_text", "drafts", "candidates", "explanation", "explanations"}


def walk(kind: str, payload, fake: bool, path: str = "") -> list[str]:
    """Every violation in one payload, as 'kind:path: reason'."""
    bad: list[str] = []

    def visit(v, where: str, keyset: str | None) -> None:
        if v is None or isinstance(v, (bool, int, float)):
            return
        if isinstance(v, str):
            if fake and where.split(".")[-1].split("[")[0] in TEXT_KEYS and not FAKE_TEXT.match(v):
                bad.append(f"{kind}:{where}: text is not an opaque fake token: {v[:60]!r}")
            return
        if isinstance(v, (list, tuple, set, frozenset)):
            for i, x in enumerate(sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v):
                visit(x, f"{where}[{i}]", keyset)
            return
        if isinstance(v, dict):
            allowed = KEYS.get(keyset) if keyset else None
            if allowed is None:
                bad.append(f"{kind}:{where}: a nested mapping no message of this kind has")
                return
            for k, x in v.items():
                if k not in allowed:
                    bad.append(f"{kind}:{where}.{k}: field not allowed in a '{keyset}' message")
                    continue
                visit(x, f"{where}.{k}" if where else str(k), "review_rep.result" if (keyset == "review_rep"
                                                                                      and k == "result") else None)
            return
        if dataclasses.is_dataclass(v):
            fields = TYPES.get(type(v))
            if fields is None:
                bad.append(f"{kind}:{where}: a {type(v).__name__} may not cross a link")
                return
            for f in dataclasses.fields(v):
                if f.name not in fields:
                    bad.append(f"{kind}:{where}.{f.name}: field not allowed in {type(v).__name__}")
                    continue
                visit(getattr(v, f.name), f"{where}.{f.name}" if where else f.name, None)
            return
        bad.append(f"{kind}:{where}: a {type(v).__name__} may not cross a link")

    if kind == "dv":  # distance vector: ability -> hop count
        if not (isinstance(payload, dict) and all(isinstance(k, str) and isinstance(d, int)
                                                  for k, d in payload.items())):
            bad.append(f"dv: not an ability -> distance map: {payload!r}"[:120])
        return bad
    if kind == "ack":
        if not isinstance(payload, int):
            bad.append(f"ack: not a message id: {payload!r}")
        return bad
    visit(payload, path, kind if kind in KEYS else None)
    return bad


@pytest.fixture
def tap(monkeypatch):
    """Records every delivered message's kind and payload."""
    from meshsim.net.network import Network

    seen: list[tuple[str, object]] = []
    orig, orig_batch = Node.receive, Network.deliver_batch

    def receive(self, msg):
        seen.append((msg.kind, msg.payload))
        return orig(self, msg)

    def deliver_batch(self, ev):  # multicasts to inline handlers skip Node.receive
        seen.extend((msg.kind, msg.payload) for _link, _dst, msg, _epoch in ev._value)
        return orig_batch(self, ev)

    monkeypatch.setattr(Node, "receive", receive)
    monkeypatch.setattr(Network, "deliver_batch", deliver_batch)
    return seen


def check(seen, fake: bool) -> set[str]:
    kinds = set()
    problems: list[str] = []
    for kind, payload in seen:
        kinds.add(kind)
        problems += walk(kind, payload, fake)
    assert not problems, "\n".join(sorted(set(problems))[:20])
    return kinds


def test_meshheal_fake_run_carries_no_truth(tap, tmp_path):
    sc = meshsim.load_scenario(ROOT / "scenarios/meshheal/staggered-math.yaml", smoke=True)
    meshsim.run(sc, seed=3, out=tmp_path)
    kinds = check(tap, fake=True)
    # the walk saw the whole protocol: tasks, reviews (committees, Takeover), summaries, routing
    assert {"task", "review_req", "review_rep", "summary", "state", "hello", "dv", "ack"} <= kinds
    modes = {p["mode"] for k, p in tap if k == "review_req"}
    assert {"initial", "r1", "r2", "candidate", "synthesis"} <= modes
    assert any(isinstance(p, TaskState) and p.Y for k, p in tap if k == "task")


@pytest.mark.parametrize("scenario,kind,sets", [
    ("scenarios/sac/sac-merg-7.yaml", "sac", []),
    ("scenarios/sac/sac-merg-7.yaml", "sac", ["agents.roles.A7=ood"]),
    ("scenarios/sac/swaying-f3.yaml", "sac", []),
    ("scenarios/sac/swaying-f0.yaml", "sac", []),
    ("scenarios/sac/cpwbft-merg-7.yaml", "cpwbft", []),
    ("scenarios/sac/cpwbft-complete-7.yaml", "cpwbft", ["protocol.params.aggregation=llm",
                                                        "protocol.params.rounds_mode=iterate",
                                                        "agents.roles.A7=persuasive"]),
    ("scenarios/sac/sac-100-lossy-equivocating.yaml", "sac", []),
    # gray failures beside a Byzantine agent (issue 20): degraded agents send what honest ones do
    ("scenarios/adversarial/sac-gray-byzantine.yaml", "sac", []),
    ("scenarios/adversarial/cpwbft-gray-byzantine.yaml", "cpwbft", ["protocol.params.rounds_mode=iterate"]),
    ("scenarios/adversarial/sac-gray-byzantine.yaml", "sac",
     ["events=[{at_task: 2, type: degrade, agents: [A1], mode: errors, rate: 0.5}]"])])
def test_consensus_fake_runs_carry_no_truth(tap, tmp_path, scenario, kind, sets):
    sc = meshsim.load_scenario(ROOT / scenario, sets, smoke=True)
    meshsim.run(sc, seed=2, out=tmp_path)
    assert kind in check(tap, fake=True)
    # the Byzantine texts with observable features did travel (as opaque tokens only)
    assert any(k == kind and p["t"] > 0 for k, p in tap) or kind == "cpwbft"


def test_replayed_real_meshheal_run_carries_no_truth(tap, tmp_path, monkeypatch):
    from tests.backends.test_replay import SECRET, _Chat, _scenario
    from tests.helpers import serve

    monkeypatch.setenv("MESHSIM_E2E_KEY", SECRET)
    with serve(_Chat, auth=[]) as srv:
        meshsim.run(_scenario(tmp_path, srv.server_address[1], "record"), out=tmp_path / "rec")
    tap.clear()
    monkeypatch.delenv("MESHSIM_E2E_KEY")
    meshsim.run(_scenario(tmp_path, srv.server_address[1], "replay"), out=tmp_path / "rep")
    kinds = check(tap, fake=False)
    assert {"task", "review_req", "review_rep"} <= kinds
    # real texts travel (what a reviewer reads), and nothing else about them
    assert any(k == "review_req" and "work for seed" in p["output_text"] for k, p in tap)


def test_the_walk_catches_truth_in_a_payload():
    """The checker is not vacuous: each kind of leak is reported."""
    from meshsim.core.calls import TaskRef

    task = TaskRef(index=1, id="t", type="x", answer="42", required=("a", "b"))
    assert walk("sac", {"q": 1, "t": 0, "answer": "4", "text": "", "latent": {"ood": True}}, True)
    assert walk("cpwbft", {"q": 1, "t": 0, "answer": "4", "text": "", "conf": 1.0, "role": "adversarial"}, True)
    assert walk("review_req", {"mode": "initial", "output_correct": True}, True)
    assert walk("review_req", {"mode": "initial", "task": task}, True)  # a TaskRef holds the gold answer
    assert walk("task", TaskState(task=task.info(), Y=[{"correct": True}]), True)
    assert walk("task", TaskState(task=task), True)
    assert walk("review_rep", {"id": 1, "result": {"score": 0.5, "correct": True}}, True)
    assert walk("sac", {"q": 1, "t": 0, "answer": "4", "text": "the answer is right (I am strong)"}, True)
    assert walk("dv", {"a": 1, "b": "near"}, True)
    assert not walk("sac", {"q": 1, "t": 0, "answer": "4", "text": "<fake q/1 00000000000000ff>"}, True)


#: values an honest MeshHeal agent's messages can hold (a liar's must stay inside them too)
def _honest_values(kind: str, p) -> list[str]:
    bad = []
    if kind == "summary":
        if p["mu"] is not None and not 0.0 <= p["mu"] <= 1.0:
            bad.append(f"summary mu {p['mu']}")
        if p["xbar"] is not None and not -1.0 <= p["xbar"] <= 1.0:
            bad.append(f"summary xbar {p['xbar']}")
    elif kind in ("state", "hello") and p["state"] not in ("normal", "watched", "isolated"):
        bad.append(f"{kind} state {p['state']}")
    elif kind == "review_rep":
        r = p["result"] or {}
        for x in list(r.get("scores", [])) + ([r["score"]] if "score" in r else []):
            if not 0.0 <= x <= 1.0:
                bad.append(f"review score {x}")
    elif kind == "dv" and any(d < 0 for d in p.values()):
        bad.append(f"dv distance {p}")
    return bad


@pytest.mark.parametrize("name", ["mixed-6", "poison-split-6", "blackhole-6", "greyhole-6", "mixed-96"])
def test_byzantine_meshheal_runs_carry_no_truth(tap, tmp_path, name):
    """Liars (issue 20: framing, shielding, summary poisoning, routing lies) send
    only the kinds, fields and value ranges an honest agent sends."""
    sc = meshsim.load_scenario(ROOT / "scenarios" / "adversarial" / f"{name}.yaml", smoke=True)
    res = meshsim.run(sc, seed=3, out=tmp_path)
    kinds = check(tap, fake=True)
    assert {"task", "summary", "state", "hello", "dv", "ack"} <= kinds
    assert res.summary["adversarial"]["liars"]
    problems = [b for k, p in tap for b in _honest_values(k, p)]
    assert not problems, problems[:10]


def test_the_value_check_catches_impossible_values():
    assert _honest_values("summary", {"mu": 1.5, "xbar": 0.0})
    assert _honest_values("summary", {"mu": 0.5, "xbar": -3.0})
    assert _honest_values("state", {"state": "trusted", "probe_at": 1})
    assert _honest_values("review_rep", {"id": 1, "result": {"scores": [0.5, 2.0]}})
    assert _honest_values("dv", {"a": -1})
    assert not _honest_values("summary", {"mu": 1.0, "xbar": -0.2})
