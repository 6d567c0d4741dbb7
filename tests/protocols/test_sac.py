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
from meshsim.core.calls import CallKind, Request, Response
from meshsim.core.errors import InputError, ScenarioError
from meshsim.protocols import PROTOCOLS
from meshsim.protocols.consensus import DATASETS, ROLES, make_queries, parse_answer, parse_score, sac_filter
from meshsim.graphs.robustness import robustness
from meshsim.scenario.model import Role, build_graph, check_semantics
from meshsim.graphs import build
from meshsim.io.records import read_records

ROOT = Path(__file__).resolve().parents[2]
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
        # F-local bounds only the honest agents' Byzantine neighbours: a faulty agent may have more than F,
        # and then trimming F cannot remove them all, so the bound is the paper's only where at most F are.
        if sum(1 for j in scores if j in B) <= F:
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


# ---------------------------------------------------------------- the fake: call-level mechanisms


def _backend(overrides=None, seed=5):
    spec = {"kind": "fake_consensus", "profile": "sac-default"}
    if overrides:
        spec["overrides"] = overrides
    return make_backend(spec, seed, ROOT / "scenarios")


def _call(b, kind, model, task, seed, **ctx):
    return b.complete_sync(Request(kind, "A1", model, task, context=ctx, seed=seed))


def test_fake_initial_accuracy_matches_profile():
    """The one calibrated number per (model, dataset): a solve's marginal accuracy."""
    backend = _backend()
    rnd = random.Random(2)
    for ds, target in (("math500", (0.683, 0.433, 0.351)), ("boolq", (0.603, 0.574, 0.364))):
        tasks = make_queries(DATASETS[ds], 1500, random.Random(1))
        got = [statistics.fmean(_call(backend, CallKind.SAC_ANSWER, m, t, rnd.getrandbits(62), **ctx).correct
                                for t in tasks)
               for m, ctx in (("strong", {}), ("weak", {}), ("weak", {"attack": "cached"}))]
        assert all(abs(g - x) < 0.04 for g, x in zip(got, target)), (ds, got)
    # wrong answers cluster: two wrong weak answers to the same query often agree
    tasks = make_queries(DATASETS["math500"], 600, random.Random(1))
    same = wrong_pairs = 0
    for t in tasks:
        a, b = (_call(backend, CallKind.SAC_ANSWER, "weak", t, rnd.getrandbits(62)).fields["answer"] for _ in "ab")
        if a != t.answer and b != t.answer:
            wrong_pairs += 1
            same += a == b
    assert same / wrong_pairs > 0.25
    bq = make_queries(DATASETS["boolq"], 200, random.Random(3))
    assert {t.answer for t in bq} <= {"true", "false"}
    cs = make_queries(DATASETS["commonsense170k"], 300, random.Random(3))
    assert {t.choices for t in cs} == {f for f, _ in DATASETS["commonsense170k"].formats}
    assert all(t.answer in t.choices for t in cs)


def test_phi_scores_agreement_with_the_scorers_own_solution():
    """phi solves the query itself and scores the proposed answer by agreement with
    its own solution: with a scorer that always solves and always gets it right,
    the truth scores from 'agree' and a wrong answer from 'disagree'."""
    b = _backend({"score.qwen3-4b.solves": 1.0, "score.qwen3-4b.parse_fail": 0.0, "accuracy.math500.strong": 0.999})
    tasks = make_queries(DATASETS["math500"], 300, random.Random(4))
    rnd = random.Random(5)
    right = [_call(b, CallKind.SAC_SCORE, "strong", t, rnd.getrandbits(62), response={"answer": t.answer})
             .fields["score"] for t in tasks]
    wrong = [_call(b, CallKind.SAC_SCORE, "strong", t, rnd.getrandbits(62),
                   response={"answer": b.distractors(t)[0][0]}).fields["score"] for t in tasks]
    agree, disagree = b.profile.score["qwen3-4b"].agree, b.profile.score["qwen3-4b"].disagree
    assert abs(statistics.fmean(right) - agree[0]) < 0.03 and abs(statistics.fmean(wrong) - disagree[0]) < 0.03
    # a scorer that never solves cannot tell them apart
    b = _backend({"score.qwen3-4b.solves": 0.0})
    r = [_call(b, CallKind.SAC_SCORE, "strong", t, 7, response={"answer": t.answer}).fields["score"] for t in tasks]
    w = [_call(b, CallKind.SAC_SCORE, "strong", t, 7, response={"answer": b.distractors(t)[0][0]}).fields["score"]
         for t in tasks]
    assert r == w


def test_phi_sees_only_what_its_prompt_shows():
    """Nothing beyond the query and the response changes phi: not the scorer's own
    answer, not whether it is scoring itself (the prompt is the same)."""
    b = _backend()
    t = make_queries(DATASETS["math500"], 1, random.Random(1))[0]
    base = _call(b, CallKind.SAC_SCORE, "weak", t, 11, response={"answer": "3"})
    for extra in ({"own_answer": t.answer}, {"self": True}, {"own_answer": "3", "role": "adversarial"}):
        assert _call(b, CallKind.SAC_SCORE, "weak", t, 11, response={"answer": "3"}, **extra) == base


def _refine_adoption(b, task, retained, n=400, model="strong"):
    rnd = random.Random(8)
    own = task.answer
    hits = 0
    for _ in range(n):
        r = _call(b, CallKind.SAC_REFINE, model, task, rnd.getrandbits(62), own={"answer": own, "text": ""},
                  retained=retained)
        hits += r.fields["answer"] == retained[0]["answer"]
    return hits / n


def test_refine_is_swayed_by_a_persuasive_text_whatever_its_score():
    b = _backend()
    t = make_queries(DATASETS["math500"], 1, random.Random(1))[0]
    lie = _call(b, CallKind.SAC_ANSWER, "weak", t, 3, attack="persuasive")
    plain = _call(b, CallKind.SAC_ANSWER, "weak", t, 4, attack="plausible_wrong", rank=0)
    assert lie.fields["answer"] == plain.fields["answer"] != t.answer
    assert lie.text != plain.text  # tokens only: the feature stays with the backend
    low = 0.05
    swayed = _refine_adoption(b, t, [{"answer": lie.fields["answer"], "text": lie.text, "score": low}])
    calm = _refine_adoption(b, t, [{"answer": plain.fields["answer"], "text": plain.text, "score": low}])
    assert swayed > calm + 0.15, (swayed, calm)
    # with sway 0 the feature does nothing
    b0 = _backend({"refine.qwen3-4b.sway": 0.0})
    lie0 = _call(b0, CallKind.SAC_ANSWER, "weak", t, 3, attack="persuasive")
    assert abs(_refine_adoption(b0, t, [{"answer": lie0.fields["answer"], "text": lie0.text, "score": low}])
               - _refine_adoption(b0, t, [{"answer": plain.fields["answer"], "text": "", "score": low}])) < 0.06


def test_refine_susceptibility_pulls_regardless_of_score():
    t = make_queries(DATASETS["math500"], 1, random.Random(1))[0]
    wrong = {"answer": str(int(t.answer) + 1), "text": "", "score": 0.0}
    rates = [_refine_adoption(_backend({"refine.qwen3-4b.susceptibility": s}), t, [wrong]) for s in (0.0, 0.5, 2.0)]
    assert rates[0] < 0.03 and rates[0] < rates[1] < rates[2]
    # and higher shown scores pull harder
    hi = _refine_adoption(_backend(), t, [dict(wrong, score=1.0)])
    assert hi > _refine_adoption(_backend(), t, [wrong]) + 0.1


def test_cpwbft_answer_shares_the_solve_and_reports_a_verbal_confidence():
    b = _backend({"confidence.qwen3-4b.parse_fail": 0.0})
    tasks = make_queries(DATASETS["math500"], 200, random.Random(2))
    for i, t in enumerate(tasks):
        a = _call(b, CallKind.SAC_ANSWER, "strong", t, 1000 + i)
        c = _call(b, "cpwbft_answer", "strong", t, 1000 + i)
        assert a.fields["answer"] == c.fields["answer"]  # same seed, same solve: common random numbers
        assert 0.0 <= c.fields["confidence"] <= 1.0
        assert round(c.fields["confidence"] / 0.05, 6) == round(c.fields["confidence"] / 0.05)


def test_profile_overrides_are_checked(tmp_path):
    with pytest.raises(InputError) as err:
        _backend({"refine.qwen3-4b.swayy": 1.0})
    assert "overrides.refine.qwen3-4b.swayy" in str(err.value)
    with pytest.raises(InputError):
        _backend({"latent.difficulty": 0.9})  # difficulty + persist > 1
    b = _backend({"refine.qwen3-4b.sway": 0.5})
    assert b.profile.refine["qwen3-4b"].sway == 0.5 and b.describe()["overrides"] == {"refine.qwen3-4b.sway": 0.5}
    # in a scenario, the error names the scenario and backend.overrides.<path>
    for over, field in (('{"refine.qwen3-4b.nope": 1}', "backend.overrides.refine.qwen3-4b.nope"),
                        ('{"refine.qwen3-4b.sway": "lots"}', "backend.overrides.refine.qwen3-4b.sway"),
                        ('{"latent.difficulty": 0.9}', "backend.overrides.latent.difficulty")):
        sc = load("sac-merg-7", f"backend.overrides={over}")
        with pytest.raises(InputError) as err:
            check_semantics(sc, build_graph(sc))
        assert err.value.field == field and "sac-merg-7.yaml" in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------- CP-WBFT arithmetic (authors' code)


def test_cpwbft_mean_confidence_choice():
    from meshsim.protocols.cpwbft import mean_confidence_choice as pick

    # the highest MEAN wins, not the largest sum: one claimed 1.0 beats three 0.9s
    assert pick([("5", 1.0), ("7", 0.9), ("7", 0.9), ("7", 0.9)]) == ("5", 1.0)
    # own answer counts with the rest; no threshold at agent level
    assert pick([("5", 0.4), ("7", 0.3), ("7", 0.7)]) == ("7", 0.5)
    # equal means: the larger count wins; then the answer met first
    assert pick([("5", 0.8), ("7", 0.8), ("7", 0.8)]) == ("7", 0.8)
    assert pick([("5", 0.8), ("7", 0.8)]) == ("5", 0.8)
    assert pick([("7", 0.8), ("5", 0.8)]) == ("7", 0.8)


def test_cpwbft_engine_decision():
    from meshsim.observe.consensus import engine_decision as decide

    # below-threshold confidences are dropped within a group: "7" keeps only its 0.9
    assert decide([("5", 0.8), ("7", 0.9), ("7", 0.1)]) == "7"
    # unless that empties the group
    assert decide([("5", 0.3), ("7", 0.2), ("7", 0.2)]) == "5"
    # ties on mean: larger kept count
    assert decide([("5", 1.0), ("7", 1.0), ("7", 1.0)]) == "7"
    assert decide([("5", 0.0), ("7", 0.0), ("7", 0.0)]) == "7"  # no confidence at all: plurality


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


def test_cpwbft_as_the_authors_run_it(tmp_path):
    """Verbal confidence in the solve, mean-confidence arithmetic (no aggregation
    call), one exchange round then stop, the adversary claiming 1.0 and its
    neighbours taking its answer unless a group's mean ties it."""
    res = meshsim.run(load("cpwbft-complete-7", "tasks.count=6"), seed=3, out=tmp_path)
    s = res.summary
    assert set(s["calls"]["by_kind"]) == {"cpwbft_answer", "sac_answer"}  # sac_answer: the adversary's cache
    assert s["calls"]["by_kind"]["cpwbft_answer"] == 6 * 6 and s["calls"]["by_kind"]["sac_answer"] == 6
    assert s["messages"]["by_kind"]["cpwbft"]["sent"] == 6 * 42  # one round of 7 x 6 messages per query
    rounds = read_records(tmp_path, "rounds.jsonl")
    assert all(r["note"] == "stopped" for r in rounds if r["round"] >= 2)
    from meshsim.protocols.cpwbft import mean_confidence_choice

    first = {(r["query"], r["agent"]): r for r in rounds if r["round"] == 0}
    for r in rounds:
        if r["round"] != 1 or r["role"] == "adversarial":
            continue
        own = first[(r["query"], r["agent"])]
        got = [(first[(r["query"], j)]["answer"], c) for j, c in r["scores"].items()]
        assert (r["answer"], r["conf"]) == pytest.approx(mean_confidence_choice(got + [(own["answer"], own["conf"])]))
        assert r["scores"]["A7"] == 1.0
    assert 0.0 <= s["ra_authors"] <= 1.0 and s["per_round"]["1"] == s["per_round"]["6"]


@pytest.mark.parametrize("sets", [["protocol.params.aggregation=llm"],
                                  ["protocol.params.rounds_mode=iterate"],
                                  ["protocol.params.rounds_mode=resolve", "protocol.params.aggregation=llm"]])
def test_cpwbft_options_run(sets):
    s = meshsim.run(load("cpwbft-merg-7", "tasks.count=3", "protocol.params.rounds=3", *sets), seed=1).summary
    kinds = s["calls"]["by_kind"]
    assert ("cpwbft_aggregate" in kinds) == ("protocol.params.aggregation=llm" in sets)
    if "protocol.params.rounds_mode=resolve" in sets:
        assert kinds["cpwbft_answer"] == 3 * 6 * 3  # a fresh solve every round
    exchanging = 1 if not any("rounds_mode" in x for x in sets) else 3  # authors: one round, then stop
    assert s["messages"]["by_kind"]["cpwbft"]["sent"] == 3 * exchanging * 2 * 18


def test_adversaries_replay_one_cached_answer(tmp_path):
    """adversarial: the weak model's answer to the same query (one call per query,
    the precomputation); ood / persuasive: material with an observable feature."""
    for role in ("adversarial", "ood", "persuasive"):
        out = tmp_path / role
        s = meshsim.run(load("sac-complete-7", "tasks.count=4", f"agents.roles.A7={role}"), seed=2, out=out).summary
        rounds = read_records(out, "rounds.jsonl")
        for q in range(1, 5):
            adv = {r["answer"] for r in rounds if r["agent"] == "A7" and r["query"] == q}
            assert len(adv) == 1
        assert s["calls"]["by_kind"]["sac_answer"] == 4 * 7  # six honest answers + one cache per query


def test_f_zero_filters_nothing():
    s = meshsim.run(load("swaying-f0", "tasks.count=3", "protocol.params.rounds=2"), seed=1).summary
    assert s["F"] == 0 and s["filter"]["dropped_per_round"] == 0 and s["filter"]["retained_rate"]["adversarial"] == 1
    s3 = meshsim.run(load("swaying-f3", "tasks.count=3", "protocol.params.rounds=2"), seed=1).summary
    assert 0 < s3["filter"]["dropped_per_round"] <= 3


@pytest.mark.slow  # README's test command stays under 2 minutes; .ci/run runs the slow ones
def test_graph_robustness_reported_for_100_agents():
    from meshsim.graphs.robustness import robustness_report

    G = build("k_circulant", {"n": 100, "k": 4}, 1)
    info = robustness_report(G, F=2, time_limit=60)
    assert info["r_robustness"] == 4 and info["r_method"] == "milp" and info["f_plus_1_robust"] is True
    G = build("merg", {"n": 60}, 1)
    info = robustness_report(G, F=3, time_limit=0.2)
    assert info["r_robustness"] == "undecided within 0.2 s"
    lo, hi = info["r_bounds"]
    assert lo <= 30 <= hi
    small = robustness_report(build("merg", {"n": 7}, 1), F=3)
    assert small["r_robustness"] == 4 and small["r_method"] in ("exact", "bounds") and small["f_plus_1_robust"]


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
    # one --seed of a 5-seed scenario goes to its seed folder (the scenario fixes the layout)
    s = json.loads((tmp_path / "run" / "seed-3" / "summary.json").read_text())
    line = res.output.splitlines()[1]
    assert f"{s['iaa']:.3f} at round 0 (IAA) -> {s['faa']:.3f} after the last round (FAA)" in line, line
    assert f"{s['h_majority']:.3f} of queries (H-Majority)" in line, line
    assert f"BFTI {s['bfti']:+.3f} (FAA - IAA)" in line, line


@pytest.mark.slow  # README's test command stays under 2 minutes; .ci/run runs the slow ones
def test_sensitivity_sweeps_one_profile_field():
    """The sweep changes only the named field(s) (through backend.overrides) and
    returns the headline per value; determinism makes equal values agree."""
    from meshsim.paper.validation.sac import ASSUMPTIONS, SETTINGS, sensitivity

    rows = sensitivity(["refine.qwen3-4b.sway", "refine.qwen2_5-1_5b.sway"], [0.0, 4.0, 0.0], "swaying-f0", seeds=1,
                       queries=4, sets=["protocol.params.rounds=2"])
    assert [r["value"] for r in rows] == [0.0, 4.0, 0.0]
    assert rows[0]["bfti"] == rows[2]["bfti"] and rows[0]["bfti"]["n"] == 1
    with pytest.raises(InputError, match="overrides.refine.qwen3-4b.nope"):
        sensitivity("refine.qwen3-4b.nope", [1.0], "swaying-f0", seeds=1, queries=2)
    # every listed assumption names fields that exist, and every setting's scenario exists
    from meshsim.paper.validation.sac import scenario_path

    for spec in ASSUMPTIONS.values():
        _backend({p: spec["values"][0] for p in spec["paths"]})
        scenario_path(spec["scenario"])
    for setting in SETTINGS:
        for name, _sets in setting.runs:
            scenario_path(name)


# ---------------------------------------------------------------- per-model behaviour and assumption ranges (issue 17)

SAC_PROFILE = ROOT / "backends" / "sac-default.yaml"


def test_every_assumption_of_sac_default_has_a_range():
    """Every assumption-sourced number is covered by a ranges: entry (with its why),
    no paper number is, and every end of every range is a valid profile, one factor
    at a time and all factors at once (the corners meshsim uncertainty visits)."""
    from meshsim.backends.fake_consensus import ConsensusProfile
    from meshsim.backends.profiles import override_profile
    from meshsim.backends.provenance import assumption_factors, explain_rows, load_profile_data

    data = load_profile_data(SAC_PROFILE)

    def load_consensus_profile(_path, overrides):  # what backend.overrides does, without re-reading the file
        return ConsensusProfile.model_validate(override_profile(data, overrides))

    factors = assumption_factors(data, "sac-default")
    covered = {leaf[0] for f in factors for leaf in f.leaves}
    rows = explain_rows(data)
    assumptions = [r["path"] for r in rows if r["kind"] == "assumption"]
    assert len(assumptions) > 100
    assert [p for p in assumptions if p not in covered] == []
    assert [r["path"] for r in rows if r["kind"] == "paper" and r["path"] in covered] == []
    assert all(f.why for f in factors)
    for f in factors:
        for u in (0.0, 1.0):
            load_consensus_profile(SAC_PROFILE, f.values(u))
    for u in (0.0, 1.0):
        every: dict = {}
        for f in factors:
            every.update(f.values(u))
        load_consensus_profile(SAC_PROFILE, every)


def test_behaviour_belongs_to_the_model_of_the_pair():
    """score / refine / confidence follow the model that plays the role on the query's
    dataset (Sec. 5.2): the weak role on MATH level 4 is gpt-3.5-turbo, not the
    1.5B model of MATH-500; changing one model's numbers moves only that model."""
    b = _backend()
    prof = b.profile
    assert prof.model_for("weak", "math_l4") == "gpt-3_5-turbo" and prof.model_for("weak", "math500") == "qwen2_5-1_5b"
    assert prof.model_for("strong", "aime") == "qwen3-4b-thinking" and prof.model_for("weak", "aime") == "qwen3-4b"
    assert prof.model_for("strong", "no-such-dataset") == prof.pairs["default"].strong
    rnd = random.Random(3)

    def blind_share(backend, ds):  # scores from a scorer that never solves are one constant class
        tasks = make_queries(DATASETS[ds], 200, random.Random(6))
        return statistics.fmean(_call(backend, CallKind.SAC_SCORE, "weak", t, rnd.getrandbits(62),
                                      response={"answer": t.answer}).fields["score"] or 0.5 for t in tasks)

    never = {"score.gpt-3_5-turbo.solves": 0.0, "score.gpt-3_5-turbo.parse_fail": 0.0,
             "score.gpt-3_5-turbo.unsolved.1": 0.0, "score.gpt-3_5-turbo.unsolved.0": 0.33}
    assert abs(blind_share(_backend(never), "math_l4") - 0.35) < 0.011  # 0.33 rounded to the 0.05 grid
    assert abs(blind_share(_backend(never), "math500") - 0.35) > 0.1  # the 1.5B model is untouched


def test_overrides_by_role_name_the_models_instead():
    with pytest.raises(InputError) as err:
        _backend({"refine.strong.sway": 0.5})
    msg = str(err.value)
    assert err.value.field == "overrides.refine.strong.sway" and "refine.<model>.sway" in msg
    assert "gpt-3_5-turbo" in msg and "\n" not in msg


def test_a_pair_naming_a_model_without_behaviour_is_one_line(tmp_path):
    import yaml

    data = yaml.safe_load(SAC_PROFILE.read_text())
    data["pairs"]["math_l4"]["weak"] = "gpt-2"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    from meshsim.backends.fake_consensus import load_consensus_profile

    with pytest.raises(InputError) as err:
        load_consensus_profile(bad)
    assert "pairs.math_l4.weak" in str(err.value) and "gpt-2" in str(err.value) and "\n" not in str(err.value)
    # a profile keyed by role (no pairs:) still loads: every dataset uses strong / weak
    old = {k: v for k, v in data.items() if k not in ("pairs", "model_ids", "ranges")}
    for section in ("score", "refine", "confidence", "aggregate"):
        old[section] = {"strong": data[section]["qwen3-4b"], "weak": data[section]["qwen2_5-1_5b"]}
    old["sources"] = {}
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text(yaml.safe_dump(old))
    prof = load_consensus_profile(legacy, {"refine.strong.sway": 0.5})
    assert prof.model_for("weak", "math_l4") == "weak" and prof.refine["strong"].sway == 0.5


def test_factors_in_use_drop_the_models_a_dataset_never_calls():
    from meshsim.backends.fake_consensus import factors_in_use, models_used
    from meshsim.backends.provenance import assumption_factors, load_profile_data

    data = load_profile_data(SAC_PROFILE)
    factors = assumption_factors(data, "sac-default")
    assert models_used(data, ["math_l4_30"]) == {"gpt-4o-mini", "gpt-3_5-turbo"}
    kept = {f.name for f in factors_in_use(factors, data, ["math_l4_30"])}
    assert "score.gpt-3_5-turbo.solves" in kept and "confidence.gpt-4o-mini.correct.0" in kept
    assert "score.gpt-5.solves" not in kept and "refine.qwen2_5-1_5b.resolve" not in kept
    assert {"latent.difficulty", "refine.*.anchor", "tokens"} <= kept  # shared factors stay
    assert len(kept) < len(factors)
    # every model is in use on some dataset: over all of them nothing is dropped
    assert len(factors_in_use(factors, data, list(data["pairs"]))) == len(factors)
