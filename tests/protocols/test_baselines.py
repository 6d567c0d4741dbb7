"""The MeshHeal paper's baselines on the shared execution layer (issue 14; MeshHeal Sec. 6, App. B.4).

Mechanism tests cite their source: AgentNet's authors' code (``zoe-yyx/AgentNet``,
``AgentNet_Code/src/agentgraph.py`` and ``src/agent.py``), RAPS (arXiv 2602.08009,
Bayesian Reputation), AutoGen (Wu et al. 2023; MeshHeal Sec. 6: "A3 is the
mandatory manager and appears on every task path"), Symphony-Coord (arXiv
2602.00966: LinUCB selection, post-vote rewards), SAC (arXiv 2605.09076
Eq. 2-3; MeshHeal Sec. 6: three teams, two rounds, majority).

One smoke run per method (module fixture) is watched at once by: the payload
walk of test_payloads (nothing crosses a link a real message would not carry),
the locality tripwire of test_meshheal_run (controllers never read global
network state), and a call counter wrapped around the backend (the shared
layer's token and call accounting).
"""
from __future__ import annotations

import random
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsim
from meshsim.core.calls import Request, TaskRef
from meshsim.backends.fake import FakeBackend, load_fake_profile
from meshsim.protocols import PROTOCOLS
from meshsim.protocols.baselines import BASELINES, METHODS
from meshsim.protocols.baselines.agentnet import AgentNetParams, next_weight
from meshsim.protocols.baselines.common import plurality
from meshsim.protocols.baselines.symphony import (PATH1_STATE, GlobalLinUCB, context_vector, similarity,
                                                   weighted_vote)
from meshsim.io.records import read_records

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT / "scenarios" / "compare" / "persistent-bbh.yaml"
BASELINE_MODULES = tuple(f"meshsim.protocols.baselines.{m}" for m in
                         ("common", "plans", "agentnet", "raps", "autogen", "symphony", "sacteams"))
ANSWER_ID = re.compile(r"^ans-[0-9a-f]{12}$")


# ------------------------------------------------------------------------------------------ runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every method on the same smoke stream (seed 2), watched by the tap, the tripwire and a counter."""
    from tests.protocols.test_meshheal_run import _Tripwire
    from tests.network.test_payloads import walk

    from meshsim.net.network import Network
    from meshsim.net.node import Node

    from tests.protocols import test_meshheal_run

    out: dict[str, dict] = {}
    mp = pytest.MonkeyPatch()
    seen: list = []
    calls: dict = defaultdict(lambda: [0, 0])
    reqs: list = []
    try:
        orig_recv, orig_batch, orig_add = Node.receive, Network.deliver_batch, Network.add_node
        orig_complete = FakeBackend.complete_sync

        def receive(self, msg):
            seen.append((msg.kind, msg.payload))
            return orig_recv(self, msg)

        def deliver_batch(self, ev):
            seen.extend((msg.kind, msg.payload) for _l, _d, msg, _e in ev._value)
            return orig_batch(self, ev)

        def add_node(self, name):
            node = orig_add(self, name)
            node.net = _Tripwire(self)
            return node

        def complete_sync(self, req: Request):
            resp = orig_complete(self, req)
            reqs.append((req, resp))
            c = calls[req.task.index if req.task else 0]
            c[0] += 1
            c[1] += resp.prompt_tokens + resp.completion_tokens
            return resp

        mp.setattr(Node, "receive", receive)
        mp.setattr(Network, "deliver_batch", deliver_batch)
        mp.setattr(Network, "add_node", add_node)
        mp.setattr(FakeBackend, "complete_sync", complete_sync)
        mp.setattr(test_meshheal_run, "_CONTROLLER_MODULES",
                   test_meshheal_run._CONTROLLER_MODULES + BASELINE_MODULES)
        protos: dict[str, object] = {}
        for cls in (PROTOCOLS["meshheal"],) + BASELINES:
            orig_setup = cls.setup

            def setup(self, orig_setup=orig_setup):
                orig_setup(self)
                protos[self.name] = self

            mp.setattr(cls, "setup", setup)
        for m in METHODS:
            seen.clear()
            calls.clear()
            reqs.clear()
            d = tmp_path_factory.mktemp(m)
            sc = meshsim.load_scenario(COMPARE, [] if m == "meshheal" else [f"protocol={{name: {m}}}"], smoke=True)
            res = meshsim.run(sc, seed=2, out=d)
            problems = [p for kind, payload in seen for p in walk(kind, payload, True)]
            out[m] = {"summary": res.summary, "tasks": read_records(d, "tasks.jsonl"), "kinds": {k for k, _ in seen},
                      "payloads": list(seen), "problems": problems, "calls": dict(calls), "proto": protos.get(m),
                      "requests": list(reqs),
                      "out": d}
    finally:
        mp.undo()
    return out


def test_every_method_runs_on_the_same_stream(runs):
    """Same task order, same entry agent per task, same degradation schedule (App. B.4)."""
    ref = runs["meshheal"]["tasks"]
    for m in METHODS:
        rows = runs[m]["tasks"]
        assert [r["id"] for r in rows] == [r["id"] for r in ref], m
        assert [r["entry"] for r in rows] == [r["entry"] for r in ref], m
        assert [r["phase"] for r in rows] == [r["phase"] for r in ref], m
        assert runs[m]["summary"]["tasks"] == 84


def test_the_shared_layer_counts_every_call_and_token_identically(runs):
    """tasks.jsonl's calls and tokens are exactly what the backend served for that task, for every method."""
    for m in METHODS:
        got = runs[m]["calls"]
        for r in runs[m]["tasks"]:
            assert (r["calls"], r["tokens"]) == tuple(got.get(r["index"], (0, 0))), (m, r["index"])


def test_no_baseline_message_carries_truth(runs):
    for m in METHODS:
        assert not runs[m]["problems"], (m, runs[m]["problems"][:5])
    assert {"result", "feedback"} <= runs["agentnet"]["kinds"]
    assert {"result"} <= runs["raps"]["kinds"]
    assert {"request", "work", "work_done"} <= runs["autogen"]["kinds"]
    assert {"plan", "plan_step", "plan_req", "plan_rep"} <= runs["symphony"]["kinds"]
    assert {"plan", "plan_step", "sac_team"} <= runs["sac_teams"]["kinds"]
    # a parsed answer crosses links as an opaque identifier: comparable, never "right"
    answers = [p.get("answer") for m in ("symphony", "sac_teams") for k, p in runs[m]["payloads"]
               if k in ("plan_step", "sac_team")]
    assert answers and all(a is None or ANSWER_ID.match(a) for a in answers)


def test_locality_baseline_controllers_read_no_global_state(runs):
    """The tripwire on node.net raised nothing during the runs (test_meshheal_run's pattern); and
    what a controller knows of its peers came from messages, from its own neighbours."""
    from meshsim.net.network import Network

    for cls in BASELINES:
        proto = runs[cls.name]["proto"]
        assert proto is not None
        for ag in proto.agents.values():
            for name, val in vars(ag).items():
                if name == "sink":
                    continue  # write-only records for metrics
                assert not isinstance(val, (Network, cls)), (cls.name, ag.name, name)
            assert set(ag.peer_abilities) <= set(ag.node.links)
    assert PROTOCOLS["autogen"].decentralized is False  # centralized by design: it says so
    assert all(PROTOCOLS[m].decentralized for m in ("agentnet", "raps", "symphony", "sac_teams"))


# ---------------------------------------------------------------------------------- AgentNet


def test_agentnet_edge_weight_rule_of_the_authors_code():
    """agentgraph.py update_edge_weight: x1.1 on success, x0.9 on failure, clipped to [0.1, 2.0];
    an edge whose weight is <= 0.3 is removed from the router's neighbour list."""
    p = AgentNetParams()
    assert next_weight(1.0, True, p) == (pytest.approx(1.1), False)
    assert next_weight(1.0, False, p) == (pytest.approx(0.9), False)
    assert next_weight(1.9, True, p)[0] == 2.0
    assert next_weight(0.105, False, p) == (0.1, True)
    w, n = 1.0, 0
    while True:
        w, pruned = next_weight(w, False, p)
        n += 1
        if pruned:
            break
    assert n == 12 and w <= 0.3 < w / 0.9  # 0.9^12 = 0.282


def test_agentnet_learns_only_from_its_entry_judges_verdicts(runs):
    """The outcome a router learns from is the entry agent's rubric judgment of the final answer
    (score > 0.40), sent back as feedback, never the gold answer: replaying the recorded
    judgments through the update rule gives every router's weights."""
    proto = runs["agentnet"]["proto"]
    p = proto.params
    rows = runs["agentnet"]["tasks"]
    w: dict = defaultdict(dict)
    mismatched = 0
    for r in rows:
        sig = r.get("signals") or []
        assert len(sig) == 1 and sig[0]["by"] == r["entry"]
        assert sig[0]["success"] == (sig[0]["score"] > p.judge_threshold)
        mismatched += sig[0]["success"] != r["correct"]
        route = r["route"]
        for a, b in zip(route, route[1:]):  # every forwarding hop was one router decision
            w[a][b], _ = next_weight(w[a].get(b, 1.0), sig[0]["success"], p)
    assert mismatched > 0  # a noisy judge, not the gold answer
    got = proto.method_summary()["edge_weights"]
    for a, ws in got.items():
        for b, x in ws.items():
            assert x == pytest.approx(w[a][b], abs=1e-3), (a, b)


def test_agentnet_router_sees_success_rate_and_experience_from_status_messages(runs):
    """router_make_prompt lists each shown neighbour with its abilities, its success rate for the
    task type and its processed tasks; here they reach the router only in the neighbours' own
    `status` messages (execution counts and successes the entry's feedback confirmed)."""
    proto = runs["agentnet"]["proto"]
    sel = [q for q, _r in runs["agentnet"]["requests"] if q.kind == "select"]
    assert sel
    rated = 0
    for q in sel:
        for c in q.context["candidates"]:
            assert set(c) == {"agent", "abilities", "success_rate", "processed"}
            r = c["success_rate"]
            assert r is None or (0.0 < r <= 1.0 and c["processed"] >= 1)
            rated += r is not None
    assert rated > 0  # rates do reach the router
    statuses = [(k, p) for k, p in runs["agentnet"]["payloads"] if k == "status"]
    assert statuses and all(set(p) == {"counts"} for _k, p in statuses)
    for a, ag in proto.agents.items():
        assert set(ag.peer_record) <= set(ag.node.links)  # heard from its own neighbours only
        for t, (n, k) in ag.record.items():
            assert 0 <= k <= n
        for j, rec in ag.peer_record.items():  # what a neighbour said never exceeds what it did
            for t, (n, k) in rec.items():
                own = proto.agents[j].record.get(t, [0, 0])
                assert n <= own[0] and k <= own[1]
    # the success counts are the entry's verdicts on the tasks each agent executed
    succ = defaultdict(int)
    for r in runs["agentnet"]["tasks"]:
        if (r.get("signals") or [{}])[0].get("success"):
            for a in set(r["producers"]):
                succ[(a, r["type"])] += 1
    assert succ
    for (a, t), k in succ.items():
        assert proto.agents[a].record[t][1] == k


def test_fake_router_leans_on_shown_success_rates():
    """With success rates in the prompt (AgentNet's router) the fake's pick among fitting candidates
    is in proportion to them ("Not Succeed Yet" = 0.5): an assumption, documented in the fake."""
    fb = FakeBackend(load_fake_profile(ROOT / "backends" / "fake-default.yaml"), seed=1)
    ctx = {"candidates": [{"agent": "A1", "abilities": ["b"], "success_rate": 0.9, "processed": 10},
                          {"agent": "A2", "abilities": ["b"], "success_rate": 0.1, "processed": 10},
                          {"agent": "A3", "abilities": ["b"], "success_rate": None, "processed": 0}],
           "needed": ["b"]}
    got = [fb.complete_sync(_req("select", ctx, "strong", seed=k)).fields["agent"] for k in range(3000)]
    assert got.count("A1") / 3000 == pytest.approx(0.9 / 1.5, abs=0.03)
    assert got.count("A2") / 3000 == pytest.approx(0.1 / 1.5, abs=0.02)
    from meshsim.workload.prompts import build_messages

    task = TaskRef(index=1, id="m/1", type="algebra", question="Q?", answer="4", required=("b",), dataset="math")
    text = build_messages(Request(kind="select", agent="A4", model="strong", task=task, context=ctx))[-1]["content"]
    assert "success rate for this task type: 90.00%" in text and "Not Succeed Yet" in text
    assert "processed tasks of this type: 10" in text


# ---------------------------------------------------------------------------------------- RAPS


def test_raps_reputation_is_the_beta_posterior_of_the_watchdogs_judgments(runs):
    """Beta(1, 1) per peer, +1 alpha per success and +1 beta per failure of a judged output;
    blacklisted exactly when the posterior mean is below 0.5 (arXiv 2602.08009, Bayesian Reputation)."""
    proto = runs["raps"]["proto"]
    ab: dict = defaultdict(lambda: [1.0, 1.0])
    n = 0
    for r in runs["raps"]["tasks"]:
        for s in r.get("signals") or []:
            assert s["by"] != s["about"]
            ab[(s["by"], s["about"])][0 if s["success"] else 1] += 1
            n += 1
    assert n > 84  # the finalizer judges each draft, the entry the final answer
    for a, ag in proto.agents.items():
        for j in ag.ab:
            x, y = ab[(a, j)]
            assert ag.reputation(j) == pytest.approx(x / (x + y))
            assert (j in ag.blacklist) == (x / (x + y) < 0.5)


def test_raps_routes_to_the_best_reputed_subscriber_and_never_to_a_blacklisted_one(runs):
    from meshsim.protocols.baselines.raps import RAPSAgent
    from meshsim.protocols.execution import TaskState
    from meshsim.core.calls import TaskInfo

    ag = next(iter(runs["raps"]["proto"].agents.values()))
    peers = [j for j in ag.neighbours()]
    ag.ab = {peers[0]: [9.0, 1.0], peers[1]: [2.0, 8.0]}
    ag.blacklist = {peers[1]}
    M = sorted(ag.peer_abilities[peers[0]])[:1]
    X = TaskState(task=TaskInfo(index=1, id="x", type="t"), R=tuple(M), visits=[ag.name])
    gen = RAPSAgent.choose_next(ag, X, M)
    try:
        next(gen)
    except StopIteration as stop:
        order = stop.value
    assert order[0] == peers[0] and peers[1] not in order


def test_raps_reactive_subscription_withdraws_an_ability_its_verdicts_condemn_and_comes_back():
    """Our reading of Reactive Subscription (RAPS' method text is not in our sources): the producer's
    own Beta(1, 1) posterior per ability from the watchdogs' verdicts; below isolate_below it withdraws
    that subscription (announced in a hello), at or above it subscribes again."""
    from types import SimpleNamespace

    from meshsim.protocols.baselines.raps import RAPSAgent, RAPSParams
    from tests.network.test_payloads import walk

    ag = RAPSAgent.__new__(RAPSAgent)
    ag.name, ag.K = "A3", frozenset({"calculation", "enumeration"})
    ag.params = RAPSParams(reactive=True)
    ag.subscribed, ag.own = set(ag.K), {}
    ag.sink = lambda *a, **k: None
    told = []
    ag._hello_all = lambda: told.append(sorted(ag.subscribed))

    def verdict(ok, abilities=("calculation",)):
        ag._on_verdict(SimpleNamespace(payload={"task": 1, "abilities": list(abilities), "success": ok}))

    verdict(False)  # Beta(1, 2): 0.33 < 0.5
    assert ag.subscribed == {"enumeration"} and told == [["enumeration"]]
    verdict(True)  # Beta(2, 2): 0.5 -> back
    assert ag.subscribed == set(ag.K) and told[-1] == ["calculation", "enumeration"]
    verdict(False, ("figure_reasoning",))  # not a declared ability: ignored
    assert "figure_reasoning" not in ag.own and len(told) == 2
    assert not walk("verdict", {"task": 1, "abilities": ["calculation"], "success": False}, True)
    assert RAPSParams().reactive is False  # off by default: the paper's rule is not in our sources


# ------------------------------------------------------------------------------------- AutoGen


def test_autogen_manager_is_on_every_path_and_degrades_every_task(runs):
    """MeshHeal Sec. 6: A3 is the mandatory manager and appears on every task path; it infers and
    selects each speaker (with its own model: the weak one once degraded). By default it returns the
    last message, AutoGen's own default (ConversableAgent.DEFAULT_SUMMARY_METHOD = "last_msg"): no
    summary call, and the committed output is the last speaker's."""
    from meshsim.protocols.baselines.autogen import AutoGenParams

    assert AutoGenParams().summary == "last_msg"
    calls = 0
    for r in runs["autogen"]["tasks"]:
        assert "A3" in r["route"]
        acts = r["actions"]
        assert "A3:infer" in acts and "A3:summarize" not in acts
        assert sum(a.startswith("A3:select->") for a in acts) == 2
        assert acts[-1].endswith(":finalize") and not acts[-1].startswith("A3:select")
        calls += r["calls"]
    assert calls == 5 * len(runs["autogen"]["tasks"])  # infer, two selections, two speakers; no summary
    s = runs["autogen"]["summary"]
    assert s["decentralized"] is False


def test_autogen_weak_manager_uses_the_weak_model_for_its_calls(tmp_path, monkeypatch):
    models = defaultdict(set)
    orig = FakeBackend.complete_sync

    def complete_sync(self, req):
        if req.agent == "A3" and req.kind in ("select", "summarize", "infer_abilities"):
            models[(req.task.index > 42, req.kind)].add(req.model)
        return orig(self, req)

    monkeypatch.setattr(FakeBackend, "complete_sync", complete_sync)
    sc = meshsim.load_scenario(COMPARE, ["protocol={name: autogen, params: {summary: reflection}}", "tasks.count=56",
                                         "phases=[{name: healthy, tasks: 42}, {name: degraded, tasks: 14}]"],
                               smoke=True)
    meshsim.run(sc, seed=1, out=tmp_path)
    for kind in ("select", "summarize", "infer_abilities"):
        assert models[(False, kind)] == {"strong"} and models[(True, kind)] == {"weak"}, kind


# ------------------------------------------------------------------------------------ Symphony


def test_global_linucb_is_the_released_selector():
    """core/linucb_selector.py GlobalLinUCB: ONE model for all candidates, A = l2 I + sum x x',
    b = sum r x, UCB = x'A^-1 b + beta_t sqrt(x'A^-1 x), beta_t = alpha sqrt(d log(1+t/l2) + 2 log(1/delta))
    + sqrt(l2) S; the Sherman-Morrison inverse matches a direct one."""
    import numpy as np

    rnd = random.Random(1)
    bandit = GlobalLinUCB(6, l2=2.0, alpha=0.7, delta=0.1, S=1.5)
    A, b = 2.0 * np.eye(6), np.zeros(6)
    for _ in range(25):
        x = context_vector(rnd.random(), rnd.random(), rnd.random() * 3, rnd.random(), rnd.random() < 0.8)
        r = rnd.random()
        bandit.update(x, r)
        A += np.outer(x, x)
        b += r * np.array(x)
    x = np.array(context_vector(1.0, 0.0, 0.5, 0.5, True))
    Ainv = np.linalg.inv(A)
    beta = 0.7 * np.sqrt(6 * np.log(1 + 25 / 2.0) + 2 * np.log(1 / 0.1)) + np.sqrt(2.0) * 1.5
    assert bandit.ucb(list(x)) == pytest.approx(float(Ainv @ b @ x + beta * np.sqrt(x @ Ainv @ x)), rel=1e-9)
    assert bandit.t == 25


def test_symphony_context_is_build_x_and_similarity_is_capability_match():
    """build_x: x = [1, similarity, load, latency / 2 s, prior success, available], unit norm;
    CapabilityManager.match: best SequenceMatcher ratio with a declared tag, 3 places."""
    import difflib

    x = context_vector(1.0, 0.0, 0.5, 0.5, True)  # Path-1's constant state: latency 500 ms of 2 s
    raw = [1.0, 1.0, 0.0, 0.25, 0.5, 1.0]
    n = sum(v * v for v in raw) ** 0.5
    assert x == pytest.approx([v / n for v in raw])
    assert context_vector(2.0, -1.0, 9.0, 0.5, False)[5] == 0.0  # clipped, unavailable
    assert PATH1_STATE == (0.0, 0.5, 0.5, True)
    assert similarity(["calculation", "enumeration"], "enumeration") == 1.0
    want = round(difflib.SequenceMatcher(None, "calculation", "figure_reasoning").ratio(), 3)
    assert similarity(["Calculation"], "figure_reasoning") == want < 1.0
    assert similarity([], "enumeration") == 0.0


def test_symphony_weighted_vote_sums_weights_and_gives_ties_to_the_first():
    """_weighted_vote: summed plan weights decide; equal totals go to the answer seen first."""
    assert weighted_vote(["x", "y", "y"], [1.0, 0.4, 0.4]) == "x"  # one heavy plan outvotes two light ones
    assert weighted_vote(["x", "y", "y"], [1.0, 1.0, 1.0]) == "y"
    assert weighted_vote(["x", "y"], [1.0, 1.0]) == "x"
    assert weighted_vote(["y", "x"], [1.0, 1.0]) == "y"
    assert weighted_vote([], []) is None


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.floats(0.0, 1.0)), min_size=1, max_size=7))
@settings(max_examples=80, deadline=None)
def test_symphony_weighted_vote_property(votes):
    """The winner's summed weight is the largest; among equal totals it is the first answer seen."""
    keys, weights = [k for k, _w in votes], [w for _k, w in votes]
    win = weighted_vote(keys, weights)
    tot: dict = {}
    for k, w in votes:
        tot[k] = tot.get(k, 0.0) + w
    best = max(tot.values())
    assert tot[win] == best
    assert win == next(k for k in keys if tot[k] == best)


def _symphony_agent(top_l: int, tie_break: str = "order"):
    """A SymphonyAgent's selection state without a network: coordinator A1 and five neighbours."""
    from meshsim.protocols.baselines.symphony import SymphonyAgent, SymphonyParams

    ag = SymphonyAgent.__new__(SymphonyAgent)
    ag.name, ag.K = "A1", frozenset({"calculation"})
    ag.params = SymphonyParams(top_l=top_l, tie_break=tie_break, registry="name")  # a known registry order
    ag.peer_abilities = {"A2": frozenset({"enumeration"}), "A3": frozenset({"calculation"}),
                         "A4": frozenset({"calculation", "enumeration"}), "A5": frozenset({"theorem_knowledge"}),
                         "A6": frozenset({"enumeration"})}
    ag.neighbours = lambda: ["A2", "A3", "A4", "A5", "A6"]
    ag.bandit = GlobalLinUCB(6)
    ag.rnd = random.Random(1)
    ag.pulls, ag._steps = {}, {}
    return ag


def _pick(ag, chain, i, R):
    from meshsim.core.calls import TaskInfo
    from meshsim.protocols.execution import TaskState

    X = TaskState(task=TaskInfo(index=1, id="m/1", type="t", question="", dataset="math"), R=R)
    ag._steps[(1, 0)] = {}
    gen = ag.pick_step(0, i, X, chain)
    try:
        next(gen)
    except StopIteration as stop:
        return stop.value, ag._steps[(1, 0)].get(i)
    raise AssertionError("pick_step waits for nothing")


def test_symphony_shortlists_top_l_and_lets_the_global_linucb_pick():
    """_select_agent_dynamic: the top-L by similarity (registry order on ties) go to the LinUCB; an
    agent already used in the plan is skipped; equal UCB -> the first shortlisted (the code's strict >)."""
    for L in (1, 2, 3, 6):
        ag = _symphony_agent(L)
        seen = []
        orig = ag.bandit.ucb
        ag.bandit.ucb = lambda x, orig=orig: seen.append(x) or orig(x)
        a, rec = _pick(ag, [None, None], 0, ("calculation", "enumeration"))
        assert len(seen) == L  # the shortlist's size
        assert a == "A1" and rec[0] == "A1" and rec[2] == 1.0  # three holders tie: registry order
    ag = _symphony_agent(3)
    a, _ = _pick(ag, ["A4", None], 1, ("calculation", "enumeration"))
    assert a == "A2"  # enumeration holders A2, A4, A6: A4 is used in this plan
    # learning moves the pick: a context rewarded well beats an equal one that was not
    ag = _symphony_agent(6)
    x_hold = context_vector(1.0, *PATH1_STATE)
    for _ in range(30):
        ag.bandit.update(context_vector(similarity(["calculation"], "enumeration"), *PATH1_STATE), 1.0)
        ag.bandit.update(x_hold, 0.0)
    a, rec = _pick(ag, [None, None], 1, ("calculation", "enumeration"))
    assert rec[2] < 1.0 and a not in ("A2", "A4", "A6")
    # random tie-break (sensitivity): the three holders share the picks
    ag = _symphony_agent(3, "random")
    picks = {_pick(ag, [None, None], 0, ("calculation", "x"))[0] for _ in range(40)}
    assert picks == {"A1", "A3", "A4"}


def test_symphony_plans_weighted_vote_and_winner_bonus(runs):
    """Planner mode (plan_k = 3): three planners (the first three candidates), chains picked step by
    step, the weighted vote, and one base update per step plus a winner-bonus update for every step of
    every plan that voted for the winner."""
    proto = runs["symphony"]["proto"]
    rows = runs["symphony"]["tasks"]
    updates = defaultdict(int)
    # one registry order for the run, the same at every coordinator (complete graph: all six agents)
    orders = {tuple(ag.pool()) for ag in proto.agents.values()}
    assert len(orders) == 1
    registry = list(orders.pop())
    assert sorted(registry) == sorted(proto.agents)
    for r in rows:
        assert r["planners"] == registry[:3]  # no agent declares 'planning': the registry's first three
        assert len(r["plans"]) == 3 and r["plans_done"] == 3
        for chain, R in zip(r["plans"], r["plan_pairs"]):
            assert len(set(chain)) == len(chain)  # a plan does not reuse an agent while others are shortlisted
            for a, s in zip(chain, R):
                assert s in proto.K[a]  # three holders per ability, top-L = 3: only holders are shortlisted
        assert r["weights"] == [1.0, 1.0, 1.0]  # every step's agent a holder: similarity 1
        assert any(r["agree"])
        updates[r["entry"]] += 2 * 3 + 2 * sum(r["agree"])
    assert proto.method_summary()["bandit_updates"] == {a: updates.get(a, 0) for a in sorted(proto.agents)}


def test_symphony_registry_order_is_drawn_per_run_and_not_by_name():
    """Issue 34: the code's ties go to the first registered agent; who registers first is not
    documented here, so the order is drawn per run from the stream symphony/registry: the same at
    every coordinator, different across seeds, every agent first on some seed."""
    from meshsim.protocols.baselines.symphony import SymphonyAgent, SymphonyParams
    from meshsim.core.sim import Environment

    firsts = set()
    orders = set()
    names = [f"A{i}" for i in range(1, 7)]
    for seed in range(40):
        env = Environment(seed)
        per_coordinator = set()
        for me in ("A1", "A4"):
            ag = SymphonyAgent.__new__(SymphonyAgent)
            ag.env, ag.name, ag.params, ag._registry = env, me, SymphonyParams(), {}
            ag.neighbours = lambda me=me: [a for a in names if a != me]
            per_coordinator.add(tuple(ag.pool()))
        assert len(per_coordinator) == 1
        order = per_coordinator.pop()
        orders.add(order)
        firsts.add(order[0])
    assert firsts == set(names) and len(orders) > 30


def test_plurality_vote_breaks_ties_at_random_and_ignores_missing():
    rnd = random.Random(3)
    assert plurality(["x", "y", "x"], rnd) == "x"
    assert plurality([None, None], rnd) is None
    assert plurality(["x", None], rnd) == "x"
    assert {plurality(["x", "y", "z"], random.Random(k)) for k in range(40)} == {"x", "y", "z"}


# ------------------------------------------------------------------------------------ SAC teams


def test_sac_teams_three_teams_two_rounds_filter_and_majority(runs):
    """MeshHeal Sec. 6: three teams, two rounds of filter-and-refine, majority aggregation; the
    filter is SAC's Eq. 2-3 (meshsim.protocols.consensus.sac_filter) with F = 1."""
    rows = runs["sac_teams"]["tasks"]
    for r in rows:
        teams = r["teams"]
        assert len(teams) == 3 and r["teams_done"] == 3
        for step in range(2):
            assert len({t[step] for t in teams}) == 3  # three holders per ability: one per team
        rounds = [a for a in r["actions"] if ":sac_round" in a]
        assert len(rounds) == 2  # the winning team's representative ran both rounds
        for a in rounds:
            kept = a.split("kept=", 1)[1] if "kept=" in a else ""
            assert len([k for k in kept.split(",") if k]) >= 1  # F = 1 of two received: at least one kept
    calls = runs["sac_teams"]["summary"]["calls_per_task"]
    assert calls == pytest.approx(1 + 3 * 2 + 3 * (1 + 2 * (2 + 1 + 1)))  # infer, chains, phi/refine/rescore


def test_sac_teams_refine_shows_the_candidates_scores_highest_first(runs):
    """SAC Eq. 4: r_i <- M_i(x, r_i, {(r_j, s_ij)}): the refine sees each retained answer with the
    score this representative gave it (App. B.2: highest first), built by the same helper SAC uses
    (consensus.refine_shown); the phi scores are the representative's own review replies."""
    reqs = runs["sac_teams"]["requests"]
    synth = [q for q, _r in reqs if q.kind == "synthesis"]
    assert synth
    given = defaultdict(list)  # (task, representative) -> phi scores it gave this task
    for q, r in reqs:
        if q.kind == "review" and r.fields.get("score") is not None:
            given[(q.task.index, q.agent)].append(float(r.fields["score"]))
    for q in synth:
        sc = q.context["candidate_scores"]
        assert len(sc) == len(q.context["candidates"]) >= 1
        assert sc == sorted(sc, reverse=True)
        assert all(v in given[(q.task.index, q.agent)] for v in sc)


def test_fake_synthesis_leans_on_shown_scores_and_is_uniform_without():
    """The fake's failed synthesis takes a candidate in proportion to its shown score (assumption);
    MeshHeal's synthesis shows none and keeps the uniform draw."""
    from meshsim.backends.fake import SplitMix64

    rnd = SplitMix64(7)
    assert {FakeBackend._lean(["a", "b"], [1.0, 0.0], rnd) for _ in range(50)} == {"a"}
    n = sum(FakeBackend._lean(["a", "b"], [0.9, 0.1], rnd) == "a" for _ in range(2000))
    assert 1700 < n < 1900
    assert {FakeBackend._lean(["a", "b"], None, rnd) for _ in range(50)} == {"a", "b"}
    assert {FakeBackend._lean(["a", "b"], [0.0, 0.0], rnd) for _ in range(50)} == {"a", "b"}
    n = sum(FakeBackend._lean(["a", "b"], [1.0, 0.0], rnd, follow=0.5) == "a" for _ in range(2000))
    assert 1400 < n < 1600  # follow_scores 0.5: half proportional (always a), half uniform


# --------------------------------------------------------------------------------- fake calls


def _req(kind, ctx, model="strong", seed=1):
    task = TaskRef(index=1, id="bbh/t/1", type="t", answer=None, required=("a", "b"), dataset="bbh")
    return Request(kind=kind, agent="A1", model=model, task=task, abilities=(), context=ctx, seed=seed)


def test_fake_select_picks_a_holder_of_a_needed_ability_with_probability_select():
    fb = FakeBackend(load_fake_profile(ROOT / "backends" / "fake-default.yaml"), seed=1)
    ctx = {"candidates": [{"agent": "A1", "abilities": ["a"]}, {"agent": "A2", "abilities": ["b"]},
                          {"agent": "A3", "abilities": ["c"]}, {"agent": "A4", "abilities": ["c"]}],
           "needed": ["b"]}
    for model, p in (("strong", 0.97), ("weak", 0.6)):
        hits = sum(fb.complete_sync(_req("select", ctx, model, seed=k)).fields["agent"] == "A2" for k in range(4000))
        assert hits / 4000 == pytest.approx(p + (1 - p) / 4, abs=0.03)


def test_fake_answers_are_opaque_and_comparable():
    fb = FakeBackend(load_fake_profile(ROOT / "backends" / "fake-default.yaml"), seed=1)
    task = TaskRef(index=1, id="bbh/t/1", type="t", answer=None, required=("a", "b"), dataset="bbh")
    answers = []
    for k in range(200):
        r = fb.complete_sync(Request(kind="finalize", agent="A1", model="strong", task=task, abilities=("a",),
                                     context={"required": ["a", "b"], "context_items": 0, "drafts": []}, seed=k))
        answers.append((r.fields["answer"], fb.grade(task, r.text, "finalize")))
    assert all(ANSWER_ID.match(a) for a, _ in answers)
    right = {a for a, ok in answers if ok}
    assert len(right) == 1 and not right & {a for a, ok in answers if not ok}


def test_fake_summary_keeps_the_committed_answer_with_probability_summary_keep():
    """MATH answers are free-form (guess 0): a garbled summary never hits the original answer by chance."""
    fb = FakeBackend(load_fake_profile(ROOT / "backends" / "fake-default.yaml"), seed=1)
    task = TaskRef(index=1, id="math/t/1", type="t", answer=None, required=("a", "b"), dataset="math")
    kept = {"strong": 0, "weak": 0}
    n = 0
    for k in range(2000):
        r = fb.complete_sync(Request(kind="finalize", agent="A1", model="strong", task=task, abilities=("a",),
                                     context={"required": ["a", "b"], "context_items": 0, "drafts": []}, seed=k))
        for i, model in enumerate(kept):
            s = fb.complete_sync(Request(kind="summarize", agent="A3", model=model, task=task, abilities=(),
                                         context={"output_text": r.text, "action": "finalize"},
                                         seed=(i + 1) * 100_000 + k))
            kept[model] += s.fields["answer"] == r.fields["answer"]
        n += 1
    assert kept["strong"] == n
    assert kept["weak"] / n == pytest.approx(0.8, abs=0.03)


# ----------------------------------------------------------------------------------- compare


def test_meshsim_compare_prints_and_saves_the_table(tmp_path):
    from click.testing import CliRunner

    from meshsim.cli import main

    res = CliRunner().invoke(main, ["compare", str(COMPARE), "--methods", "meshheal,autogen", "--seeds", "1",
                                    "--smoke", "--workers", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "| MeshHeal |" in res.output and "| AutoGen |" in res.output
    assert "∞ (never isolated)" in res.output  # AutoGen never isolates anyone
    assert (tmp_path / "comparison.md").is_file() and (tmp_path / "comparison.json").is_file()
    bad = CliRunner().invoke(main, ["compare", str(COMPARE), "--methods", "nope"])
    assert bad.exit_code == 2 and "unknown method" in bad.output


def test_reproduce_meshheal_includes_the_comparison():
    from meshsim.paper.reproduce import experiments

    keys = {e.key for e in experiments("meshheal", 2, quick=True)}
    assert {"compare", "compare-staggered"} <= keys
    exp = next(e for e in experiments("meshheal", 2, quick=True) if e.key == "compare")
    assert {lab.split("/")[0] for lab in exp.runs} == set(METHODS)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def test_select_and_summarize_have_prompts_and_parsers_for_real_endpoints():
    """Baselines can run against an OpenAI-compatible endpoint: the two new call kinds render
    (no ground truth in the prompt) and their replies parse."""
    from meshsim.workload.prompts import build_messages, parse_agent, parse_reply

    task = TaskRef(index=1, id="m/1", type="algebra", question="What is 2+2?", answer="4", required=("a", "b"),
                   dataset="math")
    sel = Request(kind="select", agent="A3", model="strong", task=task,
                  context={"candidates": [{"agent": "A1", "abilities": ["a"]}, {"agent": "A12", "abilities": ["b"]}],
                           "needed": ["b"], "context_items": 0})
    text = "\n".join(m["content"] for m in build_messages(sel))
    assert "A12: b" in text and "What is 2+2?" in text and "4" not in text.replace("2+2", "")
    assert parse_reply(sel, 'Next: {"agent": "A12"}')[0] == {"agent": "A12"}
    assert parse_agent("A1 should go, not A12", ["A1", "A12"]) == "A1"
    assert parse_agent("nobody", ["A1"]) is None
    summ = Request(kind="summarize", agent="A3", model="weak", task=task,
                   context={"output_text": "so \\boxed{4}", "action": "finalize"})
    assert "so \\boxed{4}" in build_messages(summ)[-1]["content"]
    fields, ok = parse_reply(summ, "Final: \\boxed{4}")
    assert ok is True and fields["answer"] == "4"


def test_sac_teams_refine_prompt_shows_scores_for_real_endpoints():
    """With a real endpoint the refine (synthesis) prompt lists each candidate with its score;
    MeshHeal's synthesis, which passes no scores, renders exactly as before."""
    from meshsim.workload.prompts import build_messages

    task = TaskRef(index=1, id="m/1", type="algebra", question="What is 2+2?", answer="4", required=("a", "b"),
                   dataset="math")
    ctx = {"action": "finalize", "output_text": "mine", "drafts": [], "candidates": ["first", "second"],
           "context_items": 0}
    plain = "\n".join(m["content"] for m in build_messages(Request(kind="synthesis", agent="A1", model="strong",
                                                                   task=task, context=ctx)))
    scored = "\n".join(m["content"] for m in build_messages(Request(
        kind="synthesis", agent="A1", model="strong", task=task, context=dict(ctx, candidate_scores=[0.8, 0.55]))))
    assert "Candidate A:" in plain and "score" not in plain.split("Candidate A", 1)[1].split("\n", 1)[0]
    assert "Candidate A (your score 0.80)" in scored and "Candidate B (your score 0.55)" in scored
