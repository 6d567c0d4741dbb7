"""Byzantine MeshHeal agents (issue 20): framing, shielding, summary poisoning,
routing lies; their metrics; bad input; determinism; locality.

Runs are six-agent, 42-84 tasks (well under a second each). The whitelist of
what crosses a link is tests/network/test_payloads.py (adversarial scenarios included).
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import meshsim
from meshsim.cli import main
from meshsim.protocols.meshheal.byzantine import Lies, apply_behaviour, rescore, route_lies, state_lie, summary_lie

ROOT = Path(__file__).resolve().parents[2]
ADV = ROOT / "scenarios" / "adversarial"
FRAME6 = ADV / "frame-6.yaml"


def _run(tmp_path, events: str, seed: int = 1, count: int = 84, path: Path = FRAME6, sets=()):
    sc = meshsim.load_scenario(path, [f"events={events}", f"tasks.count={count}", *sets], smoke=True)
    out = tmp_path / f"r{seed}-{abs(hash(events)) % 10 ** 8}"
    res = meshsim.run(sc, seed=seed, out=out)
    return res.summary, out


def _rows(out: Path, name: str) -> list[dict]:
    with gzip.open(out / name, "rt") as f:
        return [json.loads(line) for line in f]


# -- pure rules -------------------------------------------------------------------------

def test_rescore_replaces_only_the_targets_scores_in_the_roles_asked():
    lies = apply_behaviour(None, "frame", {"targets": ["A1"], "score": 0.05, "roles": ["review"],
                                           "coalition": ["A4"]})
    honest = {"scores": [0.9, 1.0, 0.95]}
    assert rescore(lies, "initial", "A1", honest) == {"scores": [0.05, 0.05, 0.05]}
    assert rescore(lies, "initial", "A2", honest) == honest  # not a target
    assert rescore(lies, "r1", "A1", {"score": 0.9, "explanation": "x"}) == {"score": 0.9, "explanation": "x"}
    assert rescore(lies, "candidate", "A1", {"text": "t"}) == {"text": "t"}  # Takeover stays honest
    lies = apply_behaviour(lies, "shield", {"targets": ["A3"], "score": 0.95, "roles": ["committee"],
                                            "coalition": ["A4"]})
    assert rescore(lies, "r2", "A3", {"score": 0.1}) == {"score": 0.95}
    assert lies.frame == {"A1"} and lies.coalition == {"A4"}
    assert apply_behaviour(lies, "honest", {}) == Lies()


def test_lies_are_dealt_round_robin_over_sorted_neighbours():
    lies = apply_behaviour(None, "poison", {"mu": [1.0, None], "xbar": 0.4, "state": ["normal", "isolated"]})
    peers = ["A6", "A1", "A3"]  # sorted: A1, A3, A6
    assert summary_lie(lies, "A1", peers, 0.8, 0.0) == (1.0, 0.4)
    assert summary_lie(lies, "A3", peers, 0.8, 0.0) == (0.8, 0.4)  # null: the truth
    assert summary_lie(lies, "A6", peers, 0.8, None) == (1.0, 0.4)
    assert [state_lie(lies, p, peers, "watched") for p in ("A1", "A3", "A6")] == ["normal", "isolated", "normal"]
    assert summary_lie(None, "A1", peers, 0.8, 0.1) == (0.8, 0.1)
    route = apply_behaviour(None, "route_lie", {"abilities": "all", "distance": 0, "hole": "black", "rate": 0.5})
    assert route_lies(route, ["a", "b"]) == {"a": 0, "b": 0} and route.hole == "black"


# -- behaviours in runs ------------------------------------------------------------------

def test_framing_coalition_scores_the_target_low_and_gets_it_isolated(tmp_path):
    s, out = _run(tmp_path, "[{at_task: 1, type: frame, agents: [A4, A5], targets: [A1]}]", seed=3, count=60)
    rev = _rows(out, "reviews.jsonl.gz")
    framed = [r for r in rev if r["agent"] == "A1" and r["reviewers"][:1] in (["A4"], ["A5"])]
    assert framed and all(r["initial"] == [0.05] * 3 for r in framed)
    # honest reviewers of A1 and the framers' reviews of others are untouched
    assert any(r["initial"] != [0.05] * 3 for r in rev if r["agent"] == "A1" and r["reviewers"][:1] not in (["A4"], ["A5"]))
    assert all(r["initial"] != [0.05] * 3 for r in rev if r["agent"] != "A1" and r["reviewers"][:1] in (["A4"], ["A5"]))
    adv = s["adversarial"]
    assert adv["liars"] == ["A4", "A5"] and adv["coalition"] == ["A4", "A5"]
    assert adv["framing"]["framed_isolated"] == 1 and adv["framing"]["agents"]["A1"]["isolated_at"] > 1
    honest, _ = _run(tmp_path, "[{at_task: 1, type: recover, agents: [A6]}]", seed=3,
                     count=60)  # no liar: A1 is not isolated on this seed
    assert "A1" not in honest["detection"]["falsely_isolated"] and "adversarial" not in honest


def test_shielding_keeps_a_degraded_agent_in_service(tmp_path):
    deg = "{at_task: 1, type: degrade, agents: [A3]}"
    plain, _ = _run(tmp_path, f"[{deg}]", count=60)
    assert plain["agents"]["A3"]["isolated_at"] is not None
    s, _ = _run(tmp_path, f"[{deg}, {{at_task: 1, type: shield, agents: [A1, A2, A4, A6], targets: [A3]}}]",
                count=60)
    sh = s["adversarial"]["shielding"]
    assert sh["degraded_targets"] == 1 and sh["shielded_not_isolated"] == 1 and sh["all_shielded"] == 1.0
    assert s["agents"]["A3"]["isolated_at"] is None


def test_summary_poisoning_sends_each_neighbour_its_lie(tmp_path, monkeypatch):
    from meshsim.net.node import Node

    seen = []
    orig = Node.receive

    def receive(self, msg):
        seen.append((msg.src, self.name, msg.kind, msg.payload))
        return orig(self, msg)

    monkeypatch.setattr(Node, "receive", receive)
    _run(tmp_path, "[{at_task: 1, type: poison, agents: [A4], mu: [1.0, null], xbar: [-0.2, null], "
                   "state: [isolated, null]}]", count=42)
    summ = [(dst, p) for src, dst, k, p in seen if src == "A4" and k == "summary"]
    lied = {dst for dst, p in summ if p["mu"] == 1.0 and p["xbar"] == -0.2}
    assert lied == {"A1", "A3", "A6"}  # every other neighbour in name order
    assert summ and not any(p["mu"] == 1.0 and p["xbar"] == -0.2 for dst, p in summ if dst in ("A2", "A5"))
    states = {(dst, p["state"]) for src, dst, k, p in seen if src == "A4" and k in ("state", "hello")}
    assert ("A1", "isolated") in states and ("A2", "isolated") not in states
    # one summary per neighbour per update, as an honest broadcast sends
    per = {dst: sum(1 for d, _p in summ if d == dst) for dst in ("A1", "A2", "A3", "A5", "A6")}
    assert len(set(per.values())) == 1 and per["A1"] > 0


def test_black_hole_attracts_and_drops_tasks_and_nothing_reacts(tmp_path):
    s, out = _run(tmp_path, "[{at_task: 7, type: route_lie, agents: [A4], hole: black}]", count=42)
    r = s["adversarial"]["routing"]
    tasks = _rows(out, "tasks.jsonl.gz")
    dropped = {t["index"] for t in tasks if t["unanswered"] == "timeout"}
    assert r["attracted"] > 0 and r["lost"] == r["outcomes"]["drop"] == len(dropped) > 0
    assert min(dropped) >= 7 and r["tasks"] == 36
    assert r["lost_per_100"] == pytest.approx(100 * len(dropped) / 36)
    assert r["reaction_at"] is None and r["after_reaction"] is None  # no rule sees a dropped task
    assert s["adversarial"]["liars_isolated"] == 0


def test_grey_hole_answers_a_share_itself_and_passes_the_rest(tmp_path):
    s, out = _run(tmp_path, "[{at_task: 1, type: route_lie, agents: [A4], hole: grey, rate: 0.5}]", count=42)
    o = s["adversarial"]["routing"]["outcomes"]
    assert o["corrupt"] > 0 and o["pass"] > 0 and o["drop"] == 0
    tasks = {t["index"]: t for t in _rows(out, "tasks.jsonl.gz")}
    assert s["adversarial"]["routing"]["lost"] <= o["corrupt"]
    assert any(t["producers"][-1:] == ["A4"] and "A4:finalize" in t["actions"] for t in tasks.values())


def test_honest_event_restores_true_adverts(tmp_path):
    ev = ("[{at_task: 3, type: route_lie, agents: [A4], hole: black}, "
          "{at_task: 20, type: honest, agents: [A4]}]")
    s, out = _run(tmp_path, ev, count=42)
    r = s["adversarial"]
    assert r["routing"]["outcomes"]["drop"] > 0
    tasks = _rows(out, "tasks.jsonl.gz")
    late = [t for t in tasks if t["index"] >= 25]
    assert late and not any(t["unanswered"] for t in late)


def test_share_and_near_draw_from_the_run_stream(tmp_path):
    a, _ = _run(tmp_path, "[{at_task: 1, type: frame, near: A1, count: 3, targets: [A1]}]", seed=5, count=42)
    b, _ = _run(tmp_path, "[{at_task: 1, type: frame, near: A1, count: 3, targets: [A1]}]", seed=5, count=42)
    assert a["adversarial"]["liars"] == b["adversarial"]["liars"]
    assert len(a["adversarial"]["liars"]) == 3 and "A1" not in a["adversarial"]["liars"]
    c, _ = _run(tmp_path, "[{at_task: 1, type: shield, share: 0.5, targets: targets}]", seed=5, count=42)
    assert len(c["adversarial"]["liars"]) == 2 and not {"A3", "A5"} & set(c["adversarial"]["liars"])


def test_adversarial_runs_are_deterministic(tmp_path):
    ev = ("events=[{at_task: 1, type: frame, count: 2, targets: [A1]}, {at_task: 1, type: poison, share: 0.2, "
          "xbar: [0.5, null]}, {at_task: 9, type: route_lie, count: 1, hole: grey}]")
    for d in ("a", "b"):
        meshsim.run(meshsim.load_scenario(FRAME6, [ev], smoke=True), seed=3, out=tmp_path / d)
    for name in ("summary.json", "states.jsonl.gz", "reviews.jsonl.gz", "tasks.jsonl.gz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.mark.parametrize("events,expect", [
    ("[{at_task: 1, type: frame, agents: [A9], targets: [A1]}]", "agents[0]"),
    ("[{at_task: 1, type: frame, agents: [A2], targets: [Z1]}]", "targets[0]"),
    ("[{at_task: 1, type: frame, targets: [A1]}]", "exactly one of 'agents', 'count' or 'share'"),
    ("[{at_task: 1, type: frame, agents: [A2], count: 2, targets: [A1]}]", "exactly one of"),
    ("[{at_task: 1, type: frame, count: 6, targets: [A1]}]", "only 5 agents"),
    ("[{at_task: 1, type: poison, agents: [A2]}]", "set at least one of mu, xbar, state"),
    ("[{at_task: 1, type: poison, agents: [A2], mu: 1.5}]", "mu"),
    ("[{at_task: 1, type: poison, agents: [A2], state: broken}]", "state"),
    ("[{at_task: 1, type: route_lie, agents: [A2], abilities: [flying]}]", "abilities[0]"),
    ("[{at_task: 1, type: frame, near: Q, count: 1, targets: [A1]}]", "near"),
])
def test_bad_byzantine_events_fail_in_one_line(tmp_path, events, expect):
    r = CliRunner().invoke(main, ["run", str(FRAME6), "--smoke", "--set", f"events={events}",
                                  "--out", str(tmp_path / "run")])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expect in lines[0], lines
    assert "Traceback" not in r.output


def test_byzantine_events_need_meshheal():
    sc_path = ROOT / "scenarios" / "sac" / "sac-merg-7.yaml"
    r = CliRunner().invoke(main, ["validate", str(sc_path), "--set",
                                  "events=[{at: 1, type: frame, agents: [A1], targets: [A2]}]"])
    assert r.exit_code == 2 and "no Byzantine MeshHeal behaviours" in r.stderr


# -- locality ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mixed-6.yaml", "poison-split-6.yaml", "greyhole-6.yaml"])
def test_liars_read_only_their_node_and_messages(monkeypatch, tmp_path, name):
    """A liar's controller, like an honest one, never touches global state (the
    tripwire of test_meshheal_run), and all it holds is names and numbers."""
    from tests.protocols.test_meshheal_run import run_with_tripwire

    from meshsim.net.network import Network
    from meshsim.protocols.meshheal import MeshHeal
    from meshsim.protocols.meshheal.agent import MeshHealAgent

    proto = run_with_tripwire(monkeypatch, meshsim.load_scenario(ADV / name, smoke=True), tmp_path)
    liars = [a for a in proto.agents.values() if a.byz is not None]
    assert liars
    for ag in liars:
        for f in vars(ag.byz).values():
            assert isinstance(f, (frozenset, dict, list, float, int, str, type(None))), (ag.name, f)
            items = f if isinstance(f, (frozenset, list)) else (f.items() if isinstance(f, dict) else [])
            for x in items:
                assert not isinstance(x, (Network, MeshHeal, MeshHealAgent))
        # what it knows of peers came from messages: only neighbours appear
        assert set(ag.peer_state) <= set(ag.node.links)
        if ag.dv.lie is not None:  # the lie closes over the liar's own configuration only
            cells = [c.cell_contents for c in (ag.dv.lie.__closure__ or ())]
            assert all(not isinstance(c, (Network, MeshHeal, MeshHealAgent)) for c in cells)
    assert sys.modules["meshsim.protocols.meshheal.byzantine"].__dict__.get("simpy") is None


# -- figure -----------------------------------------------------------------------------

def test_coalition_curves_count_successes_per_size_with_wilson_intervals():
    from meshsim.plots.adversarial import coalition_figure, success_by_size, wilson

    rows = [{"events.0.count": "1", "x": "5"}, {"events.0.count": "1", "x": ""},
            {"events.0.count": "2", "x": "7"}, {"events.0.count": "2", "x": "9"}]
    got = success_by_size(rows, "events.0.count", lambda r: r["x"] != "")
    assert got == {1: (1, 2), 2: (2, 2)}
    lo, hi = wilson(5, 5)
    assert 0.5 < lo < 0.6 and hi == 1.0  # five of five seeds: P >= 0.57 at 95 %
    assert wilson(0, 5)[0] == 0.0
    fig = coalition_figure([{"title": "t", "xlabel": "x", "curves": [{"label": "a", "data": got},
                                                                      {"label": "b", "values": {1: [0.2, 0.4]}}]}])
    ax = fig.axes[0]
    assert len(ax.lines) >= 3 and ax.get_legend() is not None


# -- properties ----------------------------------------------------------------------------

_names = st.sampled_from([f"A{i}" for i in range(1, 9)])


@settings(max_examples=60, deadline=None)
@given(frame=st.sets(_names, max_size=3), shield=st.sets(_names, max_size=3), producer=_names,
       mode=st.sampled_from(["initial", "r1", "r2", "candidate", "synthesis"]),
       score=st.floats(0, 1), honest=st.lists(st.floats(0, 1), min_size=1, max_size=5))
def test_a_rescored_reply_is_a_reply_an_honest_reviewer_could_send(frame, shield, producer, mode, score, honest):
    lies = apply_behaviour(None, "frame", {"targets": sorted(frame) or ["A9"], "score": score,
                                           "roles": ["review", "committee"]})
    lies = apply_behaviour(lies, "shield", {"targets": sorted(shield) or ["A9"], "score": 1 - score,
                                            "roles": ["committee"]})
    reply = {"scores": honest} if mode == "initial" else {"score": honest[0], "explanation": "e"}
    out = rescore(lies, mode, producer, reply)
    assert set(out) == set(reply)
    vals = out.get("scores", []) + ([out["score"]] if "score" in out else [])
    assert all(0.0 <= v <= 1.0 for v in vals) and len(vals) == len(reply.get("scores", [])) + ("score" in reply)
    if producer not in frame and producer not in shield or mode in ("candidate", "synthesis"):
        assert out == reply


@settings(max_examples=60, deadline=None)
@given(peers=st.lists(_names, min_size=1, max_size=8, unique=True),
       lie=st.lists(st.one_of(st.none(), st.floats(-1, 1)), min_size=1, max_size=4))
def test_dealt_lies_cycle_over_sorted_neighbours(peers, lie):
    lies = apply_behaviour(None, "poison", {"xbar": lie})
    order = sorted(peers)
    for i, p in enumerate(order):
        want = lie[i % len(lie)]
        assert summary_lie(lies, p, peers, 0.5, 0.1) == (0.5, 0.1 if want is None else want)


def test_coalition96_figure_counts_successes_and_the_no_liar_baseline(tmp_path):
    """The 96-agent docs figure reads the twenty sweep folders: a proportion per coalition
    size from results.csv, and size 0 from the no-liar records (A1 ever isolated; A3
    isolated at some task ≥ 2017, already isolated then included)."""
    import csv
    import gzip
    import json

    from meshsim.plots.adversarial import DEFENCES_96, _isolated_during, coalition96_docs_figure

    assert _isolated_during([{"agent": "A3", "task": 10, "new": "isolated"}], "A3", 2017)  # still isolated
    assert not _isolated_during([{"agent": "A3", "task": 10, "new": "isolated"},
                                 {"agent": "A3", "task": 20, "new": "normal"}], "A3", 2017)

    def sweep(name, cols, runs, states=None):
        d = tmp_path / name
        d.mkdir()
        with open(d / "results.csv", "w", newline="") as f:
            w = csv.DictWriter(f, ["network.topology.m", "seed", "point", "status", *cols])
            w.writeheader()
            for i, r in enumerate(runs):
                w.writerow({"network.topology.m": "228", "seed": i + 1, "point": "p", "status": "ok", **r})
                if states is not None:
                    rd = d / "runs" / "p" / f"seed-{i + 1}"
                    rd.mkdir(parents=True)
                    with gzip.open(rd / "states.jsonl.gz", "wt") as g:
                        for s in states[i]:
                            g.write(json.dumps(s) + "\n")

    iso = {"agent": "A1", "task": 5, "new": "isolated"}
    sweep("frame-none", ["events.0.count", "adversarial.framing.framed_isolated"],
          [{"events.0.count": 1, "adversarial.framing.framed_isolated": v} for v in (1, 0, 0, 0)]
          + [{"events.0.count": 2, "adversarial.framing.framed_isolated": 1}] * 4)
    sweep("frame0-none", [], [{}] * 4, states=[[iso], [], [], []])
    sweep("shield-none", ["events.1.count", "adversarial.shielding.shielded_not_isolated"],
          [{"events.1.count": 1, "adversarial.shielding.shielded_not_isolated": v} for v in (1, 1, 0, 0)])
    sweep("shield0-none", [], [{}] * 2, states=[[{"agent": "A3", "task": 2100, "new": "isolated"}], []])
    fig = coalition96_docs_figure(tmp_path)
    axes = fig.axes[:4]
    frame228, shield228 = axes[0], axes[2]
    def curve(ax):
        (c,) = [c for c in ax.containers if c.get_label() == DEFENCES_96[0][1]]  # errorbar containers
        return list(c.lines[0].get_ydata())

    assert curve(frame228) == [0.25, 0.25, 1.0]  # size 0 from records: 1 of 4 seeds
    assert curve(shield228) == [0.5, 0.5]  # size 0: A3 never isolated while degraded in 1 of 2
