"""Measures that compare (issue 18, item 3) and collapse made visible (issue 17, item 5).

- one false-isolation count (an agent isolated while healthy at the moment of
  isolation) in the console line, summary.json and the sweep tables;
- detection delay in the agent's own outputs beside stream tasks;
- the degraded-majority peer sets and ability collapse, checked against a
  task-by-task recount on constructed records and on real runs.
"""
from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import meshsim
from meshsim.cli import main
from meshsim.observe.collapse import collapse_clause, collapse_summary
from meshsim.core.errors import InputError
from meshsim.observe.detection import detection_summary, self_healing

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
PERSISTENT = str(ROOT / "scenarios" / "meshheal" / "persistent-math.yaml")


# --------------------------------------------------------------------- a task-by-task recount


def _recount(n, states, intervals, topology, abilities):
    """The collapse definitions evaluated naively at every task 1..N."""
    per_task_state: dict[str, list[str]] = {}
    agents = sorted({a for _k, adj in topology for a in adj} | {s["agent"] for s in states} | set(intervals))
    for a in agents:
        cur, row = "normal", []
        mine = [s for s in states if s["agent"] == a]
        for k in range(1, n + 1):
            for s in mine:
                if max(s["task"], 1) == k:
                    cur = s["new"]
            row.append(cur)
        per_task_state[a] = row

    def deg(a, k):
        return any(b <= k < r for b, r in intervals.get(a, ()))

    def adj_at(k):
        cur = {}
        for t, adj in topology:
            if t <= k:
                cur = adj
        return cur

    maj = {a: 0 for a in agents}
    any_maj = any_col = 0
    col = {}
    for k in range(1, n + 1):
        adj = adj_at(k)
        hit = False
        for i in adj:
            normal = [j for j in adj[i] if j in adj and per_task_state[j][k - 1] == "normal"]
            d = sum(deg(j, k) for j in normal)
            if d > len(normal) - d:
                maj[i] += 1
                hit = True
        any_maj += hit
        collapsed = set()
        for s in sorted({x for a in adj for x in abilities.get(a, ())}):
            healthy = [a for a in adj if s in abilities.get(a, ()) and not deg(a, k)]
            if healthy and all(per_task_state[a][k - 1] == "isolated" for a in healthy):
                collapsed.add(s)
                col[s] = col.get(s, 0) + 1
        any_col += bool(collapsed)
    return maj, any_maj, col, any_col


def _check_against_recount(c, n, states, intervals, topology, abilities):
    maj, any_maj, col, any_col = _recount(n, states, intervals, topology, abilities)
    by_agent = {d["agent"]: d["tasks"] for d in c["degraded_majority_by_agent"]}
    assert by_agent == {a: t for a, t in maj.items() if t}
    assert c["degraded_majority_tasks"] == any_maj
    assert c["degraded_majority_agent_tasks"] == sum(maj.values())
    spans: dict[str, int] = {}
    for d in c["spans"]:
        spans[d["ability"]] = spans.get(d["ability"], 0) + d["tasks"]
        assert d["tasks"] == (d["end"] if d["end"] is not None else n + 1) - d["start"] > 0
    assert spans == col
    assert c["tasks"] == any_col and c["occurred"] == bool(col)


def _st(agent, task, new):
    return {"agent": agent, "task": task, "new": new}


def test_collapse_on_constructed_records():
    """Complete graph of five; A4 and A5 degrade at task 10; the healthy holders of x
    (A1, A2) are isolated at 12 and 14: x collapses from 14 until A2 returns at 20."""
    adj = {a: tuple(b for b in "A1 A2 A3 A4 A5".split() if b != a) for a in "A1 A2 A3 A4 A5".split()}
    K = {"A1": {"x"}, "A2": {"x", "y"}, "A3": {"y"}, "A4": {"x"}, "A5": {"y"}}
    states = [_st("A1", 12, "isolated"), _st("A2", 14, "isolated"), _st("A2", 20, "watched"),
              _st("A2", 22, "normal")]
    intervals = {"A4": [(10, 31)], "A5": [(10, 31)]}
    c = collapse_summary(30, states, intervals, [(1, adj)], K)
    assert c["occurred"] and c["first_at"] == 14 and c["abilities"] == 1
    assert c["spans"] == [{"ability": "x", "start": 14, "end": 20, "tasks": 6}]
    # A3 sees A4, A5 (degraded) against A1, A2 (healthy): 2 vs 2 until A1 is isolated at 12
    # (for good); from then on the degraded are the majority of its normal peers (2 vs 1, or 2 vs 0)
    by = {d["agent"]: d for d in c["degraded_majority_by_agent"]}
    assert by["A3"] == {"agent": "A3", "tasks": 19, "first_at": 12}
    # A1 (isolated) still has a peer set: A2, A3 against A4, A5, tipped while A2 is out (14..21)
    assert by["A1"] == {"agent": "A1", "tasks": 8, "first_at": 14}
    assert c["degraded_majority_tasks"] == 19 and c["degraded_majority_max_agent"] == 19
    _check_against_recount(c, 30, states, intervals, [(1, adj)], K)
    assert collapse_clause({"collapse": c}).startswith("COLLAPSE: every healthy holder of x isolated from task 14")
    # no degraded agents: nothing is a majority and nothing collapses (every holder healthy, none isolated)
    quiet = collapse_summary(30, [], {}, [(1, adj)], K)
    assert not quiet["occurred"] and quiet["degraded_majority_tasks"] == 0 and collapse_clause({"collapse": quiet}) is None


def test_a_degraded_holder_left_alone_is_no_collapse_but_the_last_healthy_one_isolated_is():
    adj = {"A1": ("A2",), "A2": ("A1",)}
    K = {"A1": {"x"}, "A2": {"x"}}
    # A2 degraded throughout: x's only healthy holder A1 isolated at 5 -> collapse to the end
    c = collapse_summary(10, [_st("A1", 5, "isolated")], {"A2": [(1, 11)]}, [(1, adj)], K)
    assert c["spans"] == [{"ability": "x", "start": 5, "end": None, "tasks": 6}]
    # every holder degraded: no healthy holder, no collapse
    c = collapse_summary(10, [_st("A1", 5, "isolated")], {"A1": [(1, 11)], "A2": [(1, 11)]}, [(1, adj)], K)
    assert not c["occurred"]


def test_topology_changes_are_followed():
    """A3's only neighbour is degraded A4 until a link to A1 is added at task 6."""
    adj1 = {"A1": ("A2",), "A2": ("A1",), "A3": ("A4",), "A4": ("A3",)}
    adj2 = {"A1": ("A2", "A3"), "A2": ("A1",), "A3": ("A4", "A1"), "A4": ("A3",)}
    c = collapse_summary(10, [], {"A4": [(1, 11)]}, [(1, adj1), (6, adj2)], {})
    assert {d["agent"]: d["tasks"] for d in c["degraded_majority_by_agent"]} == {"A3": 5}


_AG = [f"A{i}" for i in range(1, 7)]


@st.composite
def _records(draw):
    n = draw(st.integers(5, 40))
    edges = draw(st.sets(st.tuples(st.sampled_from(_AG), st.sampled_from(_AG)).filter(lambda e: e[0] < e[1]),
                         max_size=12))

    def adj_of(es):
        adj = {a: [] for a in _AG}
        for u, v in es:
            adj[u].append(v)
            adj[v].append(u)
        return {a: tuple(v) for a, v in adj.items()}

    topology = [(1, adj_of(edges))]
    if draw(st.booleans()):
        more = draw(st.sets(st.tuples(st.sampled_from(_AG), st.sampled_from(_AG)).filter(lambda e: e[0] < e[1]),
                            max_size=12))
        topology.append((draw(st.integers(2, n)), adj_of(more)))
    states = draw(st.lists(st.builds(_st, st.sampled_from(_AG), st.integers(0, n),
                                     st.sampled_from(["normal", "watched", "isolated"])), max_size=25))
    states.sort(key=lambda s: s["task"])
    intervals = {}
    for a in draw(st.sets(st.sampled_from(_AG), max_size=4)):
        b = draw(st.integers(1, n))
        intervals[a] = [(b, draw(st.integers(b + 1, n + 1)))]
    K = {a: draw(st.sets(st.sampled_from("xyz"), min_size=1, max_size=2)) for a in _AG}
    return n, states, intervals, topology, K


@settings(max_examples=150, deadline=None)
@given(_records())
def test_event_driven_counts_equal_a_task_by_task_recount(rec):
    n, states, intervals, topology, K = rec
    _check_against_recount(collapse_summary(n, states, intervals, topology, K), n, states, intervals, topology, K)


# --------------------------------------------------------------------- false isolations


def test_one_false_isolation_definition_with_its_named_parts():
    """A1 isolated at 3 before degrading at 10 (and again at 12, while degraded: a detection);
    A2 isolated at 45 after its recovery at 40; A3 never degraded, isolated twice."""
    states = [_st("A1", 3, "isolated"), _st("A1", 5, "normal"), _st("A1", 12, "isolated"),
              _st("A2", 15, "isolated"), _st("A2", 42, "normal"), _st("A2", 45, "isolated"),
              _st("A3", 20, "isolated"), _st("A3", 25, "normal"), _st("A3", 30, "isolated")]
    for s in states:
        s["old"] = "normal"
    intervals = {"A1": [(10, 101)], "A2": [(10, 40)]}
    eps = [self_healing(states, 10, 101, 100, "A1", outputs=[1, 4, 10, 10, 11, 12, 50]),
           self_healing(states, 10, 40, 100, "A2", outputs=[])]
    d = detection_summary(eps, states, ["A1", "A2", "A3", "A4"], intervals, 100)
    assert d["falsely_isolated"] == ["A1", "A2", "A3"] and d["false_isolations"] == 3
    assert d["false_isolation_events"] == 4  # A1 at 3, A2 at 45, A3 at 20 and 30
    assert (d["never_degraded_isolated"], d["degraded_isolated_while_healthy"], d["isolated_before_degradation"]) \
        == (1, 2, 1)
    assert d["false_isolations"] == d["never_degraded_isolated"] + d["degraded_isolated_while_healthy"]
    assert (d["healthy_agents"], d["ever_healthy_agents"]) == (2, 4)
    assert d["false_isolation_rate"] == pytest.approx(3 / 4)
    # delay in own outputs: A1's outputs at 10, 10, 11 fall in [b, c) = [10, 12)
    assert eps[0]["detection_delay"] == 2 and eps[0]["detection_delay_outputs"] == 3
    assert eps[0]["task_share"] == pytest.approx(7 / 100)
    assert d["delay_outputs_mean"] == pytest.approx(1.5)  # A2: isolated at 15 with no outputs -> 0


def _console_counts(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"(\d+)(?: of \d+)? agents? isolated while healthy", text)]


def test_console_summary_and_sweep_tables_report_the_same_false_isolation_count(tmp_path):
    """Issue 18 acceptance: one count for one run, whatever shows it. Seed 1 of the smoke
    staggered schedule isolates a degraded agent before it degrades, so the old
    'healthy agents ever isolated' count would differ from the console's (without the scenario's
    Tab. C5 warm-up, as measured: the case needs detection from the first tasks)."""
    seeds = [1, 2, 3]
    out = tmp_path / "sw"
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--set", "protocol.params.warmup=0",
                                    "--grid", "protocol.params.beta=2.0",
                                    "--seeds", ",".join(map(str, seeds)), "--workers", "1", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    with open(out / "results.csv") as fh:
        table = {int(r["seed"]): r for r in csv.DictReader(fh)}
    assert "false_isolations" not in next(iter(table.values()))  # no second, different column
    differs = False
    for seed in seeds:
        run = CliRunner().invoke(main, ["run", STAGGERED, "--smoke", "--seed", str(seed),
                                        "--set", "protocol.params.beta=2.0", "--set", "protocol.params.warmup=0",
                                        "--out", str(tmp_path / f"r{seed}")])
        assert run.exit_code == 0, run.output
        (console,) = _console_counts(run.output)
        d = json.loads(next((tmp_path / f"r{seed}").rglob("summary.json")).read_text())["detection"]
        assert console == d["false_isolations"] == int(table[seed]["detection.false_isolations"])
        assert console == len(d["falsely_isolated"])
        c = json.loads(next((tmp_path / f"r{seed}").rglob("summary.json")).read_text())["collapse"]
        assert int(table[seed]["collapse.tasks"]) == c["tasks"]
        assert table[seed]["collapse.occurred"] == str(c["occurred"])
        assert ("COLLAPSE" in run.output) is c["occurred"]
        differs |= d["never_degraded_isolated"] != d["false_isolations"]
    assert differs  # the seeds exercise the case the two old counts disagreed on
    # the short name resolves to that one column
    from meshsim.plots.sweeps import open_sweep

    sd = open_sweep(out)
    assert sd.column("false_isolations", "--metric") == "detection.false_isolations"
    with pytest.raises(InputError, match="ambiguous"):
        sd.column("missed", "--metric", choices=["missed", "detection.missed"])
    with open(out / "summary.csv") as fh:
        pts = [r for r in csv.DictReader(fh) if r["metric"] == "detection.false_isolations"]
    assert len(pts) == 1
    assert float(pts[0]["mean"]) == pytest.approx(sum(int(table[s]["detection.false_isolations"]) for s in seeds) / 3)


def test_delay_in_own_outputs_is_bounded_by_the_stream_delay(tmp_path):
    """Per detected episode the delay in own outputs is the count of the agent's reviewed
    outputs in [b, c) (reviews.jsonl), its task share its outputs per stream task, and the
    network-level statistics are over those episodes."""
    sc = meshsim.load_scenario(STAGGERED, smoke=True)
    res = meshsim.run(sc, seed=3, out=tmp_path / "r")
    s = res.summary
    reviews = [json.loads(x) for x in gzip.open(next((tmp_path / "r").rglob("reviews.jsonl.gz")), "rt")]
    n = s["tasks"]
    seen = 0
    for a, ep in s["agents"].items():
        mine = [r["task"] for r in reviews if r["agent"] == a and r["q"] is not None]
        assert ep["task_share"] == pytest.approx(len(mine) / n)
        if ep["isolated_at"] is None:
            assert ep["detection_delay_outputs"] is None
            continue
        seen += 1
        b, c = ep["degraded_at"], ep["isolated_at"]
        assert ep["detection_delay_outputs"] == sum(1 for k in mine if b <= k < c)
        assert ep["detection_delay_outputs"] >= 0 and ep["detection_delay"] == c - b
    assert seen
    d = s["detection"]
    vals = [ep["detection_delay_outputs"] for ep in s["agents"].values() if ep["detection_delay_outputs"] is not None]
    assert d["delay_outputs_mean"] == pytest.approx(sum(vals) / len(vals))
    assert d["delay_outputs_max"] == max(vals)


# --------------------------------------------------------------------- collapse on real runs


def _records_of(folder: Path):
    summ = json.loads(next(folder.rglob("summary.json")).read_text())
    states = [json.loads(x) for x in gzip.open(next(folder.rglob("states.jsonl.gz")), "rt")]
    return summ, states


@pytest.mark.parametrize("seed,collapses", [(8, True), (2, False)])
def test_collapse_on_a_real_run(tmp_path, seed, collapses):
    """Smoke persistent MATH: seed 8 isolates every healthy holder while A3 and A5
    (degraded) stay normal; seed 2 does not. Checked against a recount from states.jsonl."""
    sc = meshsim.load_scenario(PERSISTENT, smoke=True)
    res = CliRunner().invoke(main, ["run", PERSISTENT, "--smoke", "--seed", str(seed), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    summ, states = _records_of(tmp_path / "r")
    c = summ["collapse"]
    assert c["occurred"] is collapses
    assert ("COLLAPSE" in res.output) is collapses
    n = summ["tasks"]
    assert meshsim.run(sc, seed=seed).summary["collapse"] == c  # in memory as on disk
    from meshsim.scenario.model import agent_abilities, build_graph

    G = build_graph(sc, seed)
    adj = {v: tuple(G.neighbors(v)) for v in G.nodes}
    K = {a: set(k) for a, k in agent_abilities(sc, G)[0].items()}
    intervals = {a: [(43, n + 1)] for a in ("A3", "A5")}
    _check_against_recount(c, n, states, intervals, [(1, adj)], K)
    if collapses:
        assert c["first_at"] >= 43 and c["degraded_majority_tasks"] > 0
        # at the collapse every isolated agent is healthy, and the degraded stay normal
        assert set(summ["isolated_at_end"]).isdisjoint({"A3", "A5"})


@pytest.mark.parametrize("seed,collapses", [(8, True), (2, False)])
def test_timeline_and_heatmap_hatch_the_collapse_spans(tmp_path, seed, collapses):
    import matplotlib

    matplotlib.use("Agg")
    from meshsim.plots.healing import state_heatmap, timeline

    sc = meshsim.load_scenario(PERSISTENT, smoke=True)
    meshsim.run(sc, seed=seed, out=tmp_path / "r")
    folder = next((tmp_path / "r").rglob("summary.json")).parent
    c = json.loads((folder / "summary.json").read_text())["collapse"]
    fig = timeline(folder)
    gids = {p.get_gid() for ax in fig.axes for p in ax.patches if (p.get_gid() or "").startswith("collapse:")}
    ax = state_heatmap(folder)
    heat = {p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith("collapse:")}
    from meshsim.plots.folder import open_run
    from meshsim.plots.report import _headline_html

    head = _headline_html(open_run(folder))
    if not collapses:
        assert not gids and not heat and "collapse" not in fig._suptitle.get_text()
        assert "collapse" not in head
        return
    assert f"isolated from task {c['first_at']}" in head
    want = f"collapse:{c['first_at']}:"
    assert any(g.startswith(want) for g in gids) and any(g.startswith(want) for g in heat)
    assert "every healthy holder" in fig._suptitle.get_text()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(1, 60), st.lists(st.integers(1, 80), max_size=12),
       st.sets(st.integers(1, 80), max_size=40))
def test_delay_in_outputs_properties(b, span, iso_tasks, outs):
    """At most one output per task: the delay in own outputs never exceeds the delay in
    stream tasks; an agent that produces an output on every task has equal delays; an
    agent with no output before c_i has delay 0 in outputs."""
    r, n = b + span, 80
    states = [{"agent": "A", "task": k, "old": "normal", "new": new}
              for k, new in zip(sorted(iso_tasks), ["isolated", "normal"] * 6)]
    ep = self_healing(states, b, r, n, "A", outputs=sorted(outs))
    every = self_healing(states, b, r, n, "A", outputs=list(range(1, n + 1)))
    none = self_healing(states, b, r, n, "A", outputs=[])
    if ep["detection_delay"] is None:
        assert ep["detection_delay_outputs"] is None and every["detection_delay_outputs"] is None
        return
    assert 0 <= ep["detection_delay_outputs"] <= ep["detection_delay"]
    assert every["detection_delay_outputs"] == every["detection_delay"]
    assert none["detection_delay_outputs"] == 0 and none["task_share"] == 0
    assert ep["task_share"] == pytest.approx(len(outs) / n)
