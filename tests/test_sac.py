"""SAC and CP-WBFT (papers/sac-2605.09076.md): filter, Property 4.3, roles, metrics, errors, acceptance."""
from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsim
from meshsim.backends import make_backend
from meshsim.backends.base import CallKind, Request, Response
from meshsim.errors import InputError, ScenarioError
from meshsim.protocols import PROTOCOLS
from meshsim.protocols.consensus import DATASETS, ROLES, make_queries, parse_answer, parse_score, sac_filter
from meshsim.graphs.robustness import robustness
from meshsim.scenario import Role, build_graph, check_semantics
from meshsim.graphs import build
from meshsim.records import read_records

ROOT = Path(__file__).resolve().parents[1]
SAC_DIR = ROOT / "scenarios" / "sac"
TOPOLOGIES = ("merg", "complete", "er")


def load(name: str, *sets: str, smoke: bool = False):
    return meshsim.load_scenario(SAC_DIR / f"{name}.yaml", list(sets), smoke=smoke)


def test_registered_and_roles_in_step():
    assert {"sac", "cpwbft"} <= set(PROTOCOLS)
    assert tuple(get_args(Role)) == ROLES


# ---------------------------------------------------------------- the filter (Eq. 2-3)


def test_filter_drops_at_most_F_of_those_below_self():
    scores = {"A1": 0.9, "A2": 0.2, "A3": 0.4, "A4": 0.7, "A5": 0.1}
    kept, dropped = sac_filter(0.6, scores, 2)
    assert dropped == ["A5", "A2"]  # the two lowest of L = {A2, A3, A5}
    assert kept == ["A1", "A4", "A3"]  # highest first; A3 is below self but survives (F = 2)
    kept, dropped = sac_filter(0.6, scores, 5)
    assert set(dropped) == {"A2", "A3", "A5"} and kept == ["A1", "A4"]  # |L| < F: all of L
    kept, dropped = sac_filter(0.05, scores, 3)  # nothing strictly below: nothing dropped
    assert dropped == [] and len(kept) == 5
    kept, dropped = sac_filter(0.4, {"A1": 0.4, "A2": 0.4}, 1)  # ties with self are not below
    assert dropped == []


def test_filter_ties_follow_tiebreak_not_names():
    scores = {"A1": 0.3, "A2": 0.3, "A3": 0.3}
    assert sac_filter(0.9, scores, 1, {"A1": 0.9, "A2": 0.1, "A3": 0.5})[1] == ["A2"]
    assert sac_filter(0.9, scores, 1, {"A1": 0.1, "A2": 0.9, "A3": 0.5})[1] == ["A1"]


def _robust_graph(data, F: int):
    """An (F+1)-robust graph from one of the SAC App. A families."""
    r = F + 1
    kind = data.draw(st.sampled_from(["merg", "complete", "pa_robust", "er_robust", "k_circulant"]))
    seed = data.draw(st.integers(0, 10_000))
    if kind in ("merg", "complete"):
        params = {"n": data.draw(st.integers(2 * r - 1, 10))}
    elif kind == "pa_robust":
        params = {"n": data.draw(st.integers(2 * r - 1, 11)), "r": r}
    elif kind == "er_robust":
        params = {"n": data.draw(st.integers(max(2 * r - 1, 4), 9)), "r": r}
    else:
        params = {"n": data.draw(st.integers(2 * r + 1, 12)), "k": r}
    return build(kind, params, seed)


def _f_local_set(G, F: int, rnd: random.Random) -> set:
    """A random Byzantine set that is F-local (Def. 3.2)."""
    B: set = set()
    nodes = sorted(G.nodes)
    rnd.shuffle(nodes)
    for v in nodes[: rnd.randrange(len(nodes))]:
        trial = B | {v}
        if all(sum(1 for u in G.adj[w] if u in trial) <= F for w in G.nodes if w not in trial):
            B = trial
    return B


@settings(max_examples=120)
@given(data=st.data())
def test_property_4_3_on_the_filter(data):
    """Property 4.3: on an (F+1)-robust graph with an F-local Byzantine set, every
    honest agent's retained set is non-empty and holds no score below the lowest
    score it gave a reliable agent. For a reliable agent i the reliable agents'
    responses include its own (s_{i->i}); for a faulty one we use the same bound
    (its own score included), without which the property does not hold when every
    reliable neighbour outranks it."""
    F = data.draw(st.integers(1, 3))
    G = _robust_graph(data, F)
    assert robustness(G, method="exact") >= F + 1
    rnd = random.Random(data.draw(st.integers(0, 2 ** 32)))
    B = _f_local_set(G, F, rnd)
    faulty = {b for b in B if rnd.random() < 0.5}
    grid = st.integers(0, 20).map(lambda k: k / 20)  # LLM-like scores: many ties
    for i in sorted(G.nodes):
        if i in B and i not in faulty:
            continue  # adversarial agents do not run the filter
        scores = {j: data.draw(grid) for j in sorted(G.adj[i])}
        self_score = data.draw(grid)
        tiebreak = {j: rnd.random() for j in scores}
        kept, dropped = sac_filter(self_score, scores, F, tiebreak)
        assert kept, (i, scores, self_score)
        assert len(dropped) <= F and set(kept) | set(dropped) == set(scores)
        reliable = [scores[j] for j in scores if j not in B]
        assert reliable  # F-local and degree >= F+1 leave a reliable neighbour
        bound = min(reliable + [self_score])
        assert min(scores[k] for k in kept) >= bound
        if i not in B:  # the paper's statement for reliable agents, S_i including i itself
            assert all(scores[k] >= min(reliable + [self_score]) for k in kept)


# ---------------------------------------------------------------- parsing (App. B.1-B.2)


def test_parse_score_and_answer():
    assert parse_score(Response(fields={"score": 0.7})) == 0.7
    assert parse_score(Response(fields={"score": None})) is None
    assert parse_score(Response(text="I'd say 0.85, maybe 0.9")) == 0.85
    assert parse_score(Response(text="Confidence: 7")) == 1.0  # clipped to [0, 1]
    assert parse_score(Response(text="no idea")) is None
    assert parse_answer(Response(fields={"answer": "42"})) == "42"
    assert parse_answer(Response(fields={"answer": None})) is None
    assert parse_answer(Response(error="bad output")) is None
    assert parse_answer(Response(text="... so the final answer is 17")) == "17"


# ---------------------------------------------------------------- the fake


def test_fake_initial_accuracy_matches_profile():
    backend = make_backend({"kind": "fake_consensus", "profile": "sac-default"}, 5, ROOT / "scenarios")
    tasks = make_queries(DATASETS["math500"], 1500, random.Random(1))
    rnd = random.Random(2)
    acc = {}
    for model in ("strong", "weak"):
        hits = [backend.complete_sync(Request(CallKind.SAC_ANSWER, "A1", model, t, seed=rnd.getrandbits(62))).correct
                for t in tasks]
        acc[model] = statistics.fmean(hits)
    assert abs(acc["strong"] - 0.68) < 0.04 and abs(acc["weak"] - 0.43) < 0.04
    # wrong answers cluster: two wrong weak answers to the same query often agree
    same = 0
    wrong_pairs = 0
    for t in tasks[:600]:
        a, b = (backend.complete_sync(Request(CallKind.SAC_ANSWER, x, "weak", t, seed=rnd.getrandbits(62)))
                .fields["answer"] for x in ("A1", "A2"))
        if a != t.answer and b != t.answer:
            wrong_pairs += 1
            same += a == b
    assert same / wrong_pairs > 0.25
    # boolq answers are labels; a strong scorer rates correct answers above wrong ones
    bq = make_queries(DATASETS["boolq"], 200, random.Random(3))
    assert {t.answer for t in bq} <= {"true", "false"}
    sc = {True: [], False: []}
    for t in tasks[:400]:
        for ans in (t.answer, str(int(t.answer) + 1)):
            r = backend.complete_sync(Request(CallKind.SAC_SCORE, "A1", "strong", t, context={
                "response": {"answer": ans}, "own_answer": None}, seed=rnd.getrandbits(62)))
            if r.fields["score"] is not None:
                sc[ans == t.answer].append(r.fields["score"])
    assert statistics.fmean(sc[True]) > statistics.fmean(sc[False]) + 0.2


# ---------------------------------------------------------------- runs


def test_sac_run_writes_metrics_and_tables(tmp_path):
    res = meshsim.run(load("sac-merg-7", "tasks.count=6"), seed=2, out=tmp_path)
    s = res.summary
    for k in ("iaa", "faa", "bfti", "ra", "h_majority"):
        assert 0.0 <= s[k] + (1.0 if k == "bfti" else 0.0) <= 2.0
    assert math.isclose(s["bfti"], s["faa"] - s["iaa"])
    assert s["strong"]["agents"] == 4 and s["weak"]["agents"] == 2 and s["adversarial"]["agents"] == 1
    assert set(s["per_round"]) == {str(t) for t in range(7)}
    assert s["per_round"]["0"]["strong"] == s["strong"]["iaa"]
    assert s["per_round"]["6"]["weak"] == s["weak"]["faa"]
    assert s["graph"]["r_robustness"] == 4 and s["graph"]["f_plus_1_robust"]
    assert s["f_local"] and s["warnings"] == []
    assert s["calls"]["by_kind"]["sac_score"] > s["calls"]["by_kind"]["sac_refine"] > 0
    assert s["tokens"]["per_query"] > 0 and s["messages"]["by_kind"]["sac"]["sent"] == s["traffic"]["answers_sent"]
    queries = read_records(tmp_path, "queries.jsonl")
    assert [q["query"] for q in queries] == list(range(1, 7))
    assert all(len(v) == 7 for q in queries for v in q["answers"].values())
    rounds = read_records(tmp_path, "rounds.jsonl")
    honest = [r for r in rounds if r["role"] != "adversarial" and r["round"] > 0]
    assert all(len(r["retained"]) + len(r["dropped"]) == r["received"] for r in honest)
    assert all(len(r["dropped"]) <= 3 for r in honest)
    adv = [r["answer"] for r in rounds if r["role"] == "adversarial" and r["query"] == 1]
    assert len(set(adv)) == 1 and len(adv) == 7  # a cached answer, replayed every round


def test_same_seed_same_outputs(tmp_path):
    for name in ("sac-er-7", "cpwbft-merg-7"):
        a = meshsim.run(load(name, "tasks.count=4"), seed=3, out=tmp_path / name / "a")
        b = meshsim.run(load(name, "tasks.count=4"), seed=3, out=tmp_path / name / "b")
        assert a.summary == b.summary
        for f in ("summary.json", "queries.jsonl.gz", "rounds.jsonl.gz"):
            assert (tmp_path / name / "a" / f).read_bytes() == (tmp_path / name / "b" / f).read_bytes()
        c = meshsim.run(load(name, "tasks.count=4"), seed=4)
        assert c.summary != a.summary


def test_protocols_share_initial_answers():
    """Common random numbers: same seed and queries => same round-0 answers under SAC and CP-WBFT."""
    a = meshsim.run(load("sac-complete-7", "tasks.count=5"), seed=6)
    b = meshsim.run(load("cpwbft-complete-7", "tasks.count=5"), seed=6)
    assert a.summary["iaa"] == b.summary["iaa"] and a.summary["per_round"]["0"] == b.summary["per_round"]["0"]


def test_cpwbft_takes_reported_confidence(tmp_path):
    meshsim.run(load("cpwbft-complete-7", "tasks.count=3"), seed=1, out=tmp_path)
    rounds = read_records(tmp_path, "rounds.jsonl")
    seen = [r["scores"]["A7"] for r in rounds if r["role"] != "adversarial" and r["round"] > 0 and "A7" in r.get("scores", {})]
    assert seen and set(seen) == {1.0}  # the adversary always claims 1.0
    assert not any("retained" in r for r in rounds)  # nothing is filtered


def _tmp_scenario(tmp_path, body: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


BASE = """name: t
seed: 1
network:
  topology: {topology}
agents:
  roles: {roles}
protocol:
  name: {proto}
  params: {{F: {F}, rounds: {rounds}}}
backend: {{kind: fake_consensus, profile: sac-default}}
tasks: {{count: {count}}}
output: {{trace: none}}
"""


def scenario(tmp_path, topology="{kind: complete, n: 7}", roles="{A7: adversarial}", proto="sac", F=2, rounds=3,
             count=3, extra=""):
    text = BASE.format(topology=topology, roles=roles, proto=proto, F=F, rounds=rounds, count=count) + extra
    return _tmp_scenario(tmp_path, text)


def test_equivocator_and_colluders(tmp_path):
    p = scenario(tmp_path, roles="{A5: equivocating, A6: colluding, A7: colluding}", F=3)
    meshsim.run(meshsim.load_scenario(p), out=tmp_path / "run")
    rounds = read_records(tmp_path / "run", "rounds.jsonl")
    eq = [r for r in rounds if r["agent"] == "A5" and r["round"] > 0]
    assert all(len(set(r["sent_answers"].values())) > 1 for r in eq)  # different lies to different neighbours
    col = [r for r in rounds if r["role"] == "colluding"]
    for q in {r["query"] for r in col}:
        assert len({r["answer"] for r in col if r["query"] == q}) == 1  # one agreed answer
    assert all(r["scores"].get("A6" if r["agent"] == "A7" else "A7") == 1.0 and r["scores"].get("A1") == 0.0
               for r in col if r["round"] > 0)


def test_set_role_event_changes_roles_mid_run(tmp_path):
    p = scenario(tmp_path, roles="{}", count=4, extra="events:\n  - {at_task: 3, type: set_role, agents: [A2], role: adversarial}\n"
                 "  - {at_task: 4, type: set_role, agents: [A2], role: weak}\n")
    res = meshsim.run(meshsim.load_scenario(p), out=tmp_path / "run")
    q = read_records(tmp_path / "run", "queries.jsonl")
    assert [row["roles"]["A2"] for row in q] == ["strong", "strong", "adversarial", "weak"]
    assert [c["role"] for c in res.summary["role_changes"]] == ["adversarial", "weak"]
    assert res.summary["role_counts"] == {"strong": 6, "weak": 1}


def test_lossy_links_drop_answers_without_hanging():
    sc = load("sac-merg-7", "tasks.count=3", "network.links.loss=0.3", "protocol.params.round_deadline=30s")
    s = meshsim.run(sc, seed=1).summary
    assert s["traffic"]["on_time_rate"] < 0.85 and s["traffic"]["unfinished"] == 0
    assert s["queries"] == 3 and s["messages"]["by_kind"]["sac"]["dropped_loss"] > 0


def test_not_f_local_is_a_warning(tmp_path, capsys):
    p = scenario(tmp_path, topology="{kind: k_circulant, n: 10, k: 2}", roles="{A1: weak, A2: weak}", F=1, count=2)
    res = meshsim.run(meshsim.load_scenario(p))
    s = res.summary
    assert s["f_local"] is False and "not 1-local" in s["warnings"][0] and "A3 has 2" in s["warnings"][0]
    err = capsys.readouterr().err
    assert "warning:" in err and "not 1-local" in err


@pytest.mark.parametrize("sets,field", [
    (["agents.roles.A3=villain"], "agents.roles.A3"),
    (["agents.roles.A99=weak"], "agents.roles.A99"),
    (["protocol.params.F=4"], "protocol.params.F"),
    (["protocol.params.dataset=gsm9k"], "protocol.params.dataset"),
    (["protocol.params.bogus=1"], "protocol.params.bogus"),
    (["tasks=null", "duration=10s"], "protocol.params.queries"),
])
def test_bad_input_is_one_line(sets, field):
    with pytest.raises(InputError) as err:
        sc = load("sac-merg-7", *sets)
        check_semantics(sc, build_graph(sc))
    msg = str(err.value)
    assert field in msg and "\n" not in msg


def test_set_role_bad_input(tmp_path):
    bad_role = scenario(tmp_path, extra="events:\n  - {at_task: 2, type: set_role, agents: [A1], role: liar}\n")
    with pytest.raises(ScenarioError, match=r"events\[0\]\.role"):
        meshsim.load_scenario(bad_role)
    bad_agent = scenario(tmp_path, extra="events:\n  - {at_task: 2, type: set_role, agents: [A9], role: weak}\n")
    sc = meshsim.load_scenario(bad_agent)
    with pytest.raises(ScenarioError, match=r"events\[0\]\.agents\[0\]"):
        check_semantics(sc, build_graph(sc))
    routing = tmp_path / "r.yaml"
    routing.write_text("name: r\nduration: 5s\nnetwork:\n  topology: {kind: ring, n: 4}\n"
                       "events:\n  - {at: 1s, type: set_role, agents: [A1], role: weak}\n")
    sc = meshsim.load_scenario(routing)
    with pytest.raises(ScenarioError, match="has no agent roles"):
        check_semantics(sc, build_graph(sc))


# ---------------------------------------------------------------- acceptance (SAC Tab. 3 shape)


def _acceptance(seeds: list[int], queries: int | None) -> dict:
    table = {}
    for proto in ("sac", "cpwbft"):
        for topo in TOPOLOGIES:
            sets = [f"tasks.count={queries}"] if queries else []
            sc = load(f"{proto}-{topo}-7", *sets)
            runs = [meshsim.run(sc, seed=s).summary for s in seeds]
            table[(proto, topo)] = {k: statistics.fmean(r[k] for r in runs) for k in ("iaa", "faa", "bfti", "h_majority")}
    for topo in TOPOLOGIES:
        sac, cp = table[("sac", topo)], table[("cpwbft", topo)]
        assert sac["bfti"] >= -0.03, (topo, sac)
        assert cp["bfti"] <= sac["bfti"] - 0.05, (topo, sac, cp)
        assert sac["h_majority"] > cp["h_majority"], (topo, sac, cp)
    return table


def test_acceptance_one_seed():
    """The slow check's shape on one seed and 40 queries per scenario."""
    _acceptance([1], 40)


@pytest.mark.slow
def test_acceptance_five_seeds():
    """7 agents (4 strong, 2 weak, 1 adversarial), F = 3, MERG / complete / ER, 5 seeds x 100 queries."""
    table = _acceptance(list(range(1, 6)), None)
    print()
    for (proto, topo), m in sorted(table.items()):
        print(f"{proto:7s} {topo:9s} IAA {m['iaa']:.3f} FAA {m['faa']:.3f} BFTI {m['bfti']:+.3f} "
              f"H-Maj {m['h_majority']:.3f}")


def test_queries_come_from_the_task_file_when_one_is_given(tmp_path):
    """Real models need real questions: with ``tasks.file`` the queries are distinct
    items of the file (seeded order) with their gold answers."""
    items = {json.loads(l)["id"]: json.loads(l) for l in
             (ROOT / "scenarios" / "data" / "bbh-sample.jsonl").read_text().splitlines()}
    sets = ("tasks.file=../data/bbh-sample.jsonl", "tasks.count=6", "seeds=1")
    meshsim.run(load("sac-complete-7", *sets), out=tmp_path / "a")
    meshsim.run(load("sac-complete-7", *sets), out=tmp_path / "b")
    rows = read_records(tmp_path / "a", "queries.jsonl")
    assert len(rows) == 6 and len({r["id"] for r in rows}) == 6
    assert all(r["id"] in items and r["truth"] == items[r["id"]]["answer"] for r in rows)
    assert (tmp_path / "a" / "queries.jsonl.gz").read_bytes() == (tmp_path / "b" / "queries.jsonl.gz").read_bytes()
    with pytest.raises(InputError) as ei:
        meshsim.run(load("sac-complete-7", "tasks.file=../data/bbh-sample.jsonl", "tasks.count=500",
                         "seeds=1"), out=tmp_path / "c")
    assert ei.value.field == "tasks.count" and "only 96 items" in ei.value.message


def test_console_summary_shows_sac_metrics(tmp_path):
    from click.testing import CliRunner

    from meshsim.cli import main

    res = CliRunner().invoke(main, ["run", str(ROOT / "scenarios" / "sac" / "sac-er-7.yaml"), "--seed", "3",
                                    "--set", "tasks.count=4", "--out", str(tmp_path / "run")],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    line = res.output.splitlines()[1]
    for label, key in (("IAA", "iaa"), ("FAA", "faa"), ("H-Majority", "h_majority")):
        assert f"{label}={s[key]:.3f}" in line, line
    assert f"BFTI={s['bfti']:+.3f}" in line, line
