"""Gray failures in SAC / CP-WBFT runs (issue 20, Build item 2): ``degrade`` and
``recover`` events on honest consensus agents, beside Byzantine ones.

Mechanisms, not outcomes: a degraded agent's calls go to the weak model from
the query (and round) the event names and not before; a model-swapped strong
agent behaves exactly as a weak agent with the same call seeds would; the
``latency`` / ``errors`` wrappers reach its calls; the metrics split the
queries into phases and report BFTI per round; bad input is one line.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

import meshsim
from meshsim.backends.fake_consensus import ConsensusFakeBackend
from meshsim.core.errors import InputError, ScenarioError
from meshsim.observe.consensus import consensus_accuracy, gray_phase
from meshsim.io.records import read_records
from meshsim.scenario.model import build_graph, check_semantics

ROOT = Path(__file__).resolve().parents[2]
ADV = ROOT / "scenarios" / "adversarial"

BASE = """name: g
seed: 3
network:
  topology: {{kind: merg, n: 7}}
agents:
  roles: {roles}
protocol:
  name: {proto}
  params: {{F: 3, rounds: 3}}
backend: {{kind: fake_consensus, profile: sac-default}}
tasks: {{count: {count}}}
output: {{trace: none}}
"""


def write(tmp_path, events: str = "", roles: str = "{A5: weak, A6: weak, A7: adversarial}", proto: str = "sac",
          count: int = 4, name: str = "g.yaml") -> Path:
    p = tmp_path / name
    p.write_text(BASE.format(roles=roles, proto=proto, count=count) + (f"events:\n{events}" if events else ""))
    return p


@pytest.fixture
def calls(monkeypatch):
    """Every fake call as (agent, query, kind, model)."""
    seen: list[tuple] = []
    orig = ConsensusFakeBackend.complete_sync

    def tap(self, req):
        seen.append((req.agent, req.task.index, req.kind, req.model))
        return orig(self, req)

    monkeypatch.setattr(ConsensusFakeBackend, "complete_sync", tap)
    return seen


@pytest.mark.parametrize("proto", ["sac", pytest.param("cpwbft", marks=pytest.mark.slow)])
def test_degrade_acts_from_its_query_on(tmp_path, calls, proto):
    p = write(tmp_path, "  - {at_task: 3, type: degrade, agents: [A1]}\n", proto=proto)
    res = meshsim.run(meshsim.load_scenario(p), out=tmp_path / "run")
    a1 = {(q, m) for a, q, _k, m in calls if a == "A1"}
    assert a1 == {(1, "strong"), (2, "strong"), (3, "weak"), (4, "weak")}
    assert all(m == "strong" for a, _q, _k, m in calls if a in ("A2", "A3", "A4"))
    rounds = read_records(tmp_path / "run", "rounds.jsonl")
    marked = {(r["query"], r["round"]) for r in rounds if r.get("degraded")}
    assert marked == {(q, t) for q in (3, 4) for t in range(4)}
    assert all(r["agent"] == "A1" and r["role"] == "strong" for r in rounds if r.get("degraded"))
    queries = read_records(tmp_path / "run", "queries.jsonl")
    assert [q.get("degraded") for q in queries] == [None, None, {"A1": 0}, {"A1": 0}]
    gray = res.summary["gray"]
    assert gray["agents"] == ["A1"] and gray["first_query"] == 3
    assert {k: v["queries"] for k, v in gray["by_phase"].items()} == {"before": 2, "degraded": 2}
    assert gray["changes"][0] | {"t": 0} == {"agent": "A1", "degraded": True, "query": 3, "round": 0,
                                             "mode": "swap", "t": 0}


def test_queries_before_the_event_are_untouched(tmp_path):
    """The event changes nothing before its query: the same rows as a run without it."""
    meshsim.run(meshsim.load_scenario(write(tmp_path, "  - {at_task: 3, type: degrade, agents: [A1, A2]}\n")),
                out=tmp_path / "gray")
    meshsim.run(meshsim.load_scenario(write(tmp_path, name="plain.yaml")), out=tmp_path / "plain")
    for table in ("queries.jsonl", "rounds.jsonl"):
        g = [r for r in read_records(tmp_path / "gray", table) if r["query"] < 3]
        p = [r for r in read_records(tmp_path / "plain", table) if r["query"] < 3]
        assert g == p and g
    late_g = [r["answers"] for r in read_records(tmp_path / "gray", "queries.jsonl") if r["query"] >= 3]
    late_p = [r["answers"] for r in read_records(tmp_path / "plain", "queries.jsonl") if r["query"] >= 3]
    assert late_g != late_p


def test_round_names_the_first_degraded_round_and_recover_ends_it(tmp_path, calls):
    """``round: 2`` at query 2: the initial answer, its self-score and exchange 0 run
    strong; exchanges 1 and 2 run weak; ``recover`` at query 3 round 1 ends it there."""
    ev = ("  - {at_task: 2, round: 2, type: degrade, agents: [A1]}\n"
          "  - {at_task: 3, round: 1, type: recover, agents: [A1]}\n")
    res = meshsim.run(meshsim.load_scenario(write(tmp_path, ev, count=3)), out=tmp_path / "run")
    rounds = read_records(tmp_path / "run", "rounds.jsonl")
    marked = {(r["query"], r["round"]) for r in rounds if r.get("degraded")}
    assert marked == {(2, 2), (2, 3), (3, 0)}
    q2 = [(k, m) for a, q, k, m in calls if a == "A1" and q == 2]
    assert q2[0] == ("sac_answer", "strong") and q2[-1] == ("sac_score", "weak")
    assert ("sac_refine", "weak") in q2 and ("sac_refine", "strong") in q2  # exchange 0 strong, 1-2 weak
    q3 = [(k, m) for a, q, k, m in calls if a == "A1" and q == 3]
    assert q3[0] == ("sac_answer", "weak") and q3[-1] == ("sac_score", "strong")
    assert [q.get("degraded") for q in read_records(tmp_path / "run", "queries.jsonl")] == [None, {"A1": 2},
                                                                                              {"A1": 0}]
    assert [c["degraded"] for c in res.summary["gray"]["changes"]] == [True, False]


@pytest.mark.parametrize("proto", ["sac", pytest.param("cpwbft", marks=pytest.mark.slow)])
def test_a_swapped_strong_agent_behaves_as_a_weak_one(tmp_path, proto):
    """Same call seeds, same model: a strong agent degraded from query 1 answers,
    scores and refines exactly as the same agent given the weak role -- only the
    labels (role, degraded) differ."""
    meshsim.run(meshsim.load_scenario(write(tmp_path, "  - {at_task: 1, type: degrade, agents: [A2]}\n",
                                            proto=proto)), out=tmp_path / "gray")
    meshsim.run(meshsim.load_scenario(write(tmp_path, roles="{A2: weak, A5: weak, A6: weak, A7: adversarial}",
                                            proto=proto, name="weak.yaml")), out=tmp_path / "weak")
    strip = ("role", "degraded")
    g = [{k: v for k, v in r.items() if k not in strip} for r in read_records(tmp_path / "gray", "rounds.jsonl")]
    w = [{k: v for k, v in r.items() if k not in strip} for r in read_records(tmp_path / "weak", "rounds.jsonl")]
    assert g == w
    gq = read_records(tmp_path / "gray", "queries.jsonl")
    wq = read_records(tmp_path / "weak", "queries.jsonl")
    assert [q["answers"] for q in gq] == [q["answers"] for q in wq]


@pytest.mark.slow  # two runs: with the slow checks
def test_latency_and_errors_modes_reach_the_calls(tmp_path):
    ev = "  - {at_task: 2, type: degrade, agents: [A1], mode: errors, rate: 1.0}\n"
    meshsim.run(meshsim.load_scenario(write(tmp_path, ev, count=2)), out=tmp_path / "err")
    rounds = read_records(tmp_path / "err", "rounds.jsonl")
    a1 = [r for r in rounds if r["agent"] == "A1"]
    assert all(r["answer"] is not None for r in a1 if r["query"] == 1)
    assert all(r["answer"] is None and r["degraded"] == "errors" for r in a1 if r["query"] == 2)
    # 1000x slower calls: A1 misses every round deadline of query 2, so nobody hears from it
    ev = "  - {at_task: 2, type: degrade, agents: [A1], mode: latency, factor: 1000}\n"
    meshsim.run(meshsim.load_scenario(write(tmp_path, ev, count=2, name="lat.yaml")), out=tmp_path / "lat")
    rounds = read_records(tmp_path / "lat", "rounds.jsonl")
    heard = [r for r in rounds if r["query"] == 2 and r["round"] > 0 and r["agent"] != "A1" and "scores" in r]
    assert heard and all("A1" not in r["scores"] for r in heard)
    heard1 = [r for r in rounds if r["query"] == 1 and r["round"] > 0 and r["agent"] == "A2"]
    assert any("A1" in r["scores"] for r in heard1)


@pytest.mark.slow  # six runs: with the slow checks
def test_share_draws_strong_agents_from_the_seed(tmp_path):
    ev = "  - {at_task: 2, type: degrade, share: 0.5}\n"
    p = write(tmp_path, ev, count=2)
    a = meshsim.run(meshsim.load_scenario(p), seed=5).summary["gray"]["agents"]
    b = meshsim.run(meshsim.load_scenario(p), seed=5).summary["gray"]["agents"]
    assert a == b and len(a) == 2 and set(a) <= {"A1", "A2", "A3", "A4"}
    picks = {tuple(meshsim.run(meshsim.load_scenario(p, ["protocol.params.rounds=1", "tasks.count=2"]),
                               seed=s).summary["gray"]["agents"]) for s in range(1, 5)}
    assert len(picks) > 1  # the draw follows the seed


def test_bfti_per_round_and_phases():
    rows = [{"query": 1, "truth": "1", "roles": {"A": "strong", "B": "strong", "C": "adversarial"},
             "answers": {"A": ["1", "1"], "B": ["2", "1"], "C": ["2", "2"]}},
            {"query": 2, "truth": "1", "roles": {"A": "strong", "B": "strong", "C": "adversarial"},
             "answers": {"A": ["2", "2"], "B": ["1", "1"], "C": ["2", "2"]}, "degraded": {"A": 0}},
            {"query": 3, "truth": "1", "roles": {"A": "strong", "B": "strong", "C": "adversarial"},
             "answers": {"A": ["1", "1"], "B": ["1", "2"], "C": ["1", "1"]}}]
    assert gray_phase(rows) == ["before", "degraded", "after"]
    per = consensus_accuracy(rows, 1)
    assert math.isclose(per["0"]["all"], 5 / 9) and math.isclose(per["1"]["all"], 5 / 9)
    assert per["1"]["bfti"] == 0.0 and per["0"]["bfti"] == 0.0
    assert per["0"]["degraded"] == 0.0 and per["0"]["healthy"] == 0.8  # A in query 2 only
    one = consensus_accuracy(rows[:1], 1)
    assert math.isclose(one["1"]["bfti"], 1 / 3)


def test_summary_per_round_bfti_matches_the_headline(tmp_path):
    res = meshsim.run(meshsim.load_scenario(ADV / "sac-gray-byzantine.yaml", smoke=True), out=tmp_path / "a")
    s = res.summary
    T = s["rounds"]
    assert s["per_round"]["0"]["bfti"] == 0.0 and math.isclose(s["per_round"][str(T)]["bfti"], s["bfti"])
    gray = s["gray"]["by_phase"]
    assert set(gray) == {"before", "degraded"}
    n = sum(v["queries"] for v in gray.values())
    assert n == s["queries"]
    # the phases' pooled accuracies recombine into the run's
    for t in range(T + 1):
        pooled = sum(v["per_round"][str(t)]["all"] * v["queries"] for v in gray.values()) / n
        assert math.isclose(pooled, s["per_round"][str(t)]["all"])
    assert any("counted as faulty" in w for w in s["warnings"]) and s["f_local"] is False
    b = meshsim.run(meshsim.load_scenario(ADV / "sac-gray-byzantine.yaml", smoke=True), out=tmp_path / "b")
    assert b.summary == s
    for f in ("summary.json", "queries.jsonl.gz", "rounds.jsonl.gz"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_controllers_do_not_hold_the_gray_failure(tmp_path):
    """Locality: the failure lives in the infrastructure (the protocol's schedule, read
    by the LLM client); a controller holds no protocol, network or schedule."""
    from meshsim.net.network import Network
    from meshsim.protocols.consensus import ConsensusProtocol

    seen = {}
    orig = ConsensusProtocol.setup

    def setup(self):
        orig(self)
        seen["proto"] = self

    ConsensusProtocol.setup = setup
    try:
        meshsim.run(meshsim.load_scenario(write(tmp_path, "  - {at_task: 2, type: degrade, agents: [A1]}\n",
                                                count=2)))
    finally:
        ConsensusProtocol.setup = orig
    proto = seen["proto"]
    assert proto.health["A1"]
    for ctrl in proto.agents.values():
        for name, val in vars(ctrl).items():
            if name == "sink":
                continue  # write-only records
            assert not isinstance(val, (Network, ConsensusProtocol)), (ctrl.name, name)
            assert name not in ("health", "fault", "degraded"), (ctrl.name, name)
    controller = sys.modules["meshsim.protocols.consensus"].ConsensusAgent
    assert "degrad" not in "".join(k for k in vars(controller) if not k.startswith("__"))


@pytest.mark.parametrize("ev,field", [
    ("{at: 5s, round: 1, type: degrade, agents: [A1]}", "events[0].round"),
    ("{at_task: 2, type: degrade, share: 0.5, agents: [A1]}", "events[0].share"),
    ("{at_task: 2, type: degrade, share: 0.5, mode: errors}", "events[0].mode"),
    ("{at_task: 2, type: recover}", "events[0].agents"),
    ("{at_task: 2, type: degrade, agents: targets}", "events[0].agents"),
])
def test_bad_gray_events_are_one_line(tmp_path, ev, field):
    with pytest.raises((InputError, ScenarioError)) as err:
        sc = meshsim.load_scenario(write(tmp_path, f"  - {ev}\n"))
        check_semantics(sc, build_graph(sc))
    assert field in str(err.value) and "\n" not in str(err.value)


def test_role_changes_before_the_event_are_taken_into_account(tmp_path):
    # A5 turns strong at query 2, so a swap at query 3 is meaningful
    ok = ("  - {at_task: 2, type: set_role, agents: [A5], role: strong}\n"
          "  - {at_task: 3, type: degrade, agents: [A5]}\n")
    sc = meshsim.load_scenario(write(tmp_path, ok))
    check_semantics(sc, build_graph(sc))
    # A1 turns adversarial first: degrading it is refused before the run
    bad = ("  - {at_task: 2, type: set_role, agents: [A1], role: adversarial}\n"
           "  - {at_task: 3, type: degrade, agents: [A1]}\n")
    sc = meshsim.load_scenario(write(tmp_path, bad, name="bad.yaml"))
    with pytest.raises(ScenarioError, match=r"events\[1\]\.agents\[0\].*Byzantine role 'adversarial'"):
        check_semantics(sc, build_graph(sc))
    # a time event turns it adversarial: caught when the degrade fires, one line naming the event
    late = ("  - {at: 1s, type: set_role, agents: [A1], role: adversarial}\n"
            "  - {at_task: 3, type: degrade, agents: [A1]}\n")
    sc = meshsim.load_scenario(write(tmp_path, late, name="late.yaml"))
    with pytest.raises(InputError, match=r"events\[1\]\.agents.*Byzantine role 'adversarial'"):
        meshsim.run(sc)


def test_meshheal_refuses_rounds_and_shares(tmp_path):
    src = (ROOT / "scenarios" / "meshheal" / "staggered-math.yaml").read_text()
    import yaml

    data = yaml.safe_load(src)
    for ev, field in (({"at_task": 5, "type": "degrade", "agents": ["A1"], "round": 1}, "round"),
                      ({"at_task": 5, "type": "degrade", "share": 0.5}, "share")):
        data["events"] = [ev]
        p = tmp_path / "m.yaml"
        p.write_text(yaml.safe_dump(data))
        with pytest.raises((InputError, ScenarioError)) as err:
            sc = meshsim.load_scenario(p)
            check_semantics(sc, build_graph(sc))
        assert f"events[0].{field}" in str(err.value)


@pytest.mark.slow  # several runs (and matplotlib): with the slow checks
def test_gray_table_and_figure(tmp_path):
    pytest.importorskip("matplotlib")
    from meshsim.core.errors import RunFolderError
    from meshsim.plots.report import gray_table, tables
    from meshsim.plots.sac import gray_figure

    sets = ["seeds=2", "tasks.count=4"]
    for F in (0, 3):
        meshsim.run(meshsim.load_scenario(ADV / "sac-gray-byzantine.yaml", sets + [f"protocol.params.F={F}"],
                                          smoke=True), out=tmp_path / f"F{F}")
    t = gray_table([tmp_path / "F3", tmp_path / "F0"])
    assert [r[:2] for r in t.rows] == [["SAC F=3", "before"], ["SAC F=3", "degraded"], ["SAC F=0", "before"],
                                       ["SAC F=0", "degraded"]]
    assert t.columns[-1] == "BFTI(2) (pp)" and all(r[2] == "2" for r in t.rows)
    agg = json_load(tmp_path / "F3" / "aggregate.json")
    assert math.isclose(t.data[1][-2], agg["metrics"]["gray.by_phase.degraded.bfti"]["mean"] * 100)
    assert any(x.name == "gray" for x in tables(tmp_path / "F3"))
    fig = gray_figure([tmp_path / "F3", tmp_path / "F0"])
    assert len(fig.axes) == 3 and fig.axes[1].lines
    meshsim.run(meshsim.load_scenario(ADV / "sac-gray-byzantine.yaml", ["events=[]"], smoke=True),
                out=tmp_path / "plain")
    with pytest.raises(RunFolderError, match="no 'gray' section"):
        gray_table([tmp_path / "plain"])


def json_load(p: Path) -> dict:
    import json

    return json.loads(p.read_text())
