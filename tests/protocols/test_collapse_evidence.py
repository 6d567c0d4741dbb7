"""Collapse, explained and bounded (issue 29, item 3): the evidence view of each
isolation rebuilt from a run's records (meshsim.analysis.evidence, ``meshsim explain``),
and the per-run collapse metric as a sweep column, P(collapse) and a search
constraint."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.cli import main
from meshsim.observe.collapse import clopper_pearson, collapse_rate
from meshsim.core.errors import InputError
from meshsim.analysis.evidence import explain_folder, explain_records, format_explanation, witnesses_of

PARAMS = {"window": 3, "beta": 2.0, "alpha": 1.0, "consecutive": 2, "spread_floor": 0.1}


def _review(task, agent, reviewers, q0, round2=(), z=None, state="normal", x=0.0, xbar=0.0, m=0.0, p25=-0.1,
            t=None, ability="s1"):
    committee = bool(round2)
    q = sum(round2) / len(round2) if committee else q0
    return {"task": task, "t": float(t if t is not None else task), "type": "T", "agent": agent,
            "abilities": [ability], "probe": False, "output_correct": True, "q0": q0, "committee": committee,
            "round2": list(round2), "q": q, "reviewers": list(reviewers),
            "reviewer_views": {j: "normal" for j in reviewers},
            "detector": [{"ability": ability, "matched": True, "shortfall": x, "xbar": xbar, "m": m, "p25": p25,
                          "z": z, "state": state}]}


def _hand_made():
    """B's window of 3: one score by the healthy D, two by the degraded C (a committee of C twice);
    z = (x̄ − m) / 0.1 crosses beta 2 on the last two updates."""
    xs = [0.1, 0.4, 0.5]
    rows = []
    for i, (x, who, r2) in enumerate(zip(xs, (["D"], ["C", "C", "C"], ["C", "C", "C"]),
                                         ((), (0.5, 0.6), (0.4, 0.5)))):
        win = xs[:i + 1]
        xbar = sum(win) / len(win)
        z = xbar / 0.1
        rows.append(_review(10 + i, "B", who, 0.9 - x, r2, z=z, x=x, xbar=xbar,
                            state="isolated" if i == 2 else ("watched" if z >= 1 else "normal")))
    states = [{"agent": "B", "task": 11, "t": 11.0, "old": "normal", "new": "watched"},
              {"agent": "B", "task": 12, "t": 12.0, "old": "watched", "new": "isolated"},
              {"agent": "C", "task": 5, "t": 5.0, "old": "normal", "new": "watched"},
              {"agent": "C", "task": 6, "t": 6.0, "old": "watched", "new": "normal"}]
    return rows, states


def test_witnesses_are_the_scores_that_made_q_alg2():
    assert witnesses_of({"reviewers": ["A"], "q0": 0.7, "committee": False, "round2": []}) == [("A", 0.7, "initial")]
    assert witnesses_of({"reviewers": ["A", "B", "C"], "q0": 0.2, "committee": True, "round2": [0.3, 0.5]}) == \
        [("B", 0.3, "committee"), ("C", 0.5, "committee")]
    # a committee that did not finish: q is the initial reviewer's q0
    assert witnesses_of({"reviewers": ["A"], "q0": 0.2, "committee": True, "round2": []}) == [("A", 0.2, "initial")]
    assert witnesses_of({"reviewers": [], "q0": None}) == []


def test_hand_made_isolation_names_its_reviewers_their_health_state_and_the_pivot():
    rows, states = _hand_made()
    ex = explain_records(rows, states, {"C": [(8, 100)]}, PARAMS, n_tasks=99)
    (iso,) = ex.isolations
    assert (iso.agent, iso.task, iso.healthy, iso.exact) == ("B", 12, True, True)
    assert iso.crossings == (11, 12) and len(iso.window) == 3
    assert iso.degraded_only == 2
    parts = {r.reviewer: r for r in iso.reviewers}
    c, d = parts["C"], parts["D"]
    assert (c.entries, c.degraded_entries, c.states) == (2, 2, ("normal",))
    assert c.mean_score == pytest.approx((0.5 + 0.6 + 0.4 + 0.5) / 4)
    # without C's scores only D's shortfall 0.1 is left: z 1 < beta, so C was pivotal; without D z = 4.5
    assert c.z_without == pytest.approx(1.0) and c.pivotal is True
    assert d.z_without == pytest.approx(4.5) and d.pivotal is False and d.degraded_entries == 0
    # C degraded from task 8, never isolated, produced no output: no Miss (only intervals with outputs are listed)
    assert ex.misses == ()
    text = format_explanation(ex)
    assert "B isolated at task 12 (healthy: a false isolation)" in text and "C 0.5 DEG normal" in text


def test_a_reviewers_state_is_its_own_at_the_reviews_time():
    rows, states = _hand_made()
    rows[1]["t"] = 5.5  # C was watched between t 5 and 6
    iso = explain_records(rows, states, {}, PARAMS).isolations[0]
    assert {r.reviewer: r.states for r in iso.reviewers}["C"] == ("watched", "normal")
    assert not any(w.degraded for e in iso.window for w in e.witnesses)  # no intervals: nobody degraded


def test_a_window_the_records_do_not_rebuild_is_marked_not_exact():
    rows, states = _hand_made()
    rows[2]["detector"][0]["xbar"] += 0.05  # as under credibility weights, which are not recorded
    iso = explain_records(rows, states, {}, PARAMS).isolations[0]
    assert iso.exact is False and all(r.pivotal is None for r in iso.reviewers)


def test_other_detectors_are_refused_in_one_line():
    with pytest.raises(InputError, match="relative detector"):
        explain_records([], [], {}, {"detector": "cusum"})


@settings(max_examples=40, deadline=None)
@given(xs=st.lists(st.floats(-0.5, 1.0), min_size=1, max_size=12), window=st.integers(1, 6))
def test_the_rebuilt_window_is_the_detectors_last_window_shortfalls(xs, window):
    """Property: whatever the shortfalls, the window at an isolation is the last ``window`` matched
    updates and its mean is the recorded x̄ (so exact), the z-without of a reviewer of every entry None."""
    rows = []
    for i, x in enumerate(xs):
        win = xs[max(0, i + 1 - window):i + 1]
        xbar = sum(win) / len(win)
        last = i == len(xs) - 1
        rows.append(_review(i + 1, "B", ["C"], 0.5, z=xbar / 0.1, x=x, xbar=xbar,
                            state="isolated" if last else "normal"))
    iso = explain_records(rows, [], {}, dict(PARAMS, window=window, beta=-1e9)).isolations[-1]
    assert [e.shortfall for e in iso.window] == xs[-window:]
    assert iso.exact and iso.reviewers[0].z_without is None and iso.reviewers[0].pivotal


# ------------------------------------------------------------------------------------ a real run

REPRO = ["--set", "protocol.params.alpha=0.9468", "--set", "protocol.params.beta=4.239",
         "--set", "protocol.params.window=8", "--set", "protocol.params.min_obs=5"]


@pytest.fixture(scope="module")
def collapse_run(tmp_path_factory):
    """The issue's repro: persistent-math seed 9916 at the search's recommendation (about 1.5 s)."""
    out = tmp_path_factory.mktemp("collapse") / "r"
    res = CliRunner().invoke(main, ["run", "scenarios/meshheal/persistent-math.yaml", "--seed", "9916", *REPRO,
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_seed_9916_collapses_by_degraded_reviewers_isolating_healthy_agents(collapse_run):
    summary = json.loads((collapse_run / "seed-9916" / "summary.json").read_text())
    assert summary["collapse"]["occurred"] is True
    ex = explain_folder(collapse_run / "seed-9916")
    iso = ex.isolations
    assert {i.agent for i in iso} == {"A1", "A2", "A4"} and all(i.healthy for i in iso)
    assert all(i.exact and len(i.crossings) == 2 and i.crossings[-1] == i.task and len(i.window) == 8 for i in iso)
    # the mechanism: the scores behind each false isolation came from the degraded A3 and A5, still normal
    for i in iso:
        assert i.degraded_only >= 7
        top = i.reviewers[0]
        assert top.reviewer in ("A3", "A5") and top.degraded_entries == top.entries and top.states == ("normal",)
    # ... and the degraded agents were never isolated because their outputs found no eligible reviewer
    assert {m.agent for m in ex.misses} == {"A3", "A5"}
    assert all(m.unreviewed > m.outputs / 2 for m in ex.misses)
    # every isolation the states table holds is explained, at its task
    states = [json.loads(line) for line in __import__("gzip").open(collapse_run / "seed-9916" / "states.jsonl.gz")]
    assert [(s["agent"], s["task"]) for s in states if s["new"] == "isolated"] == [(i.agent, i.task) for i in iso]


def test_meshsim_explain_prints_the_evidence_and_json(collapse_run):
    res = CliRunner().invoke(main, ["explain", str(collapse_run), "--agent", "A1", "--brief"])
    assert res.exit_code == 0, res.output
    assert "A1 isolated at task 312 (healthy: a false isolation)" in res.output and "COLLAPSE" in res.output
    assert "A3" in res.output and "pivotal" in res.output
    res = CliRunner().invoke(main, ["explain", str(collapse_run), "--json"])
    d = json.loads(res.output)
    assert d["seed"] == 9916 and len(d["isolations"]) == 5 and d["isolations"][0]["degraded_only"] >= 7


def test_the_run_report_has_an_isolation_evidence_table(collapse_run):
    from meshsim.plots.report import tables

    (t,) = [t for t in tables(collapse_run / "seed-9916") if t.name == "evidence"]
    assert [r[:3] for r in t.rows] == [["A4", "284", "yes"], ["A1", "312", "yes"], ["A4", "339", "yes"],
                                       ["A4", "421", "yes"], ["A2", "460", "yes"]]
    assert t.rows[0][5].startswith("A3 (degraded, normal) 6/8, pivotal")
    assert "A4,284,True" in t.to_csv()


@pytest.mark.parametrize("args, message", [(["--agent", "A9"], "--agent: this agent never changed state"),
                                           (["--seed", "3"], "--seed: no such seed")])
def test_meshsim_explain_bad_input_is_one_line_exit_2(collapse_run, args, message):
    res = CliRunner().invoke(main, ["explain", str(collapse_run), *args])
    assert res.exit_code == 2 and message in res.output and len(res.output.strip().splitlines()) == 1


def test_meshsim_explain_without_reviews_says_how_to_get_them(collapse_run, tmp_path):
    import shutil

    f = tmp_path / "s"
    shutil.copytree(collapse_run / "seed-9916", f)
    (f / "reviews.jsonl.gz").unlink()
    res = CliRunner().invoke(main, ["explain", str(f)])
    assert res.exit_code == 2 and "reviews.jsonl missing" in res.output and "--output full" in res.output


# ------------------------------------------------------------------------------------ the metric


def test_collapse_occurred_is_a_results_column_its_point_mean_is_p_collapse_and_a_search_constraint():
    from meshsim.sweep.results import flatten, point_rows
    from meshsim.sweep.search import parse_constraint

    flats = [flatten({"seed": s, "collapse": {"occurred": s in (2, 5), "first_at": None}}) for s in range(1, 7)]
    assert all("collapse.occurred" in f for f in flats)
    rows = [dict(f, seed=s, point="p", status="ok", a=1) for s, f in zip(range(1, 7), flats)]
    cols, out = point_rows(["a", "seed", "point", "status"] + sorted(flats[0]), rows, ["a"])
    (row,) = [r for r in out if r["metric"] == "collapse.occurred"]
    assert row["mean"] == pytest.approx(2 / 6) and row["n"] == 6
    c = parse_constraint("collapse.occurred==0")
    assert c.holds(0.0) and not c.holds(row["mean"])


def test_clopper_pearson_bounds_p_collapse_even_with_no_collapse():
    assert clopper_pearson(0, 60) == (0.0, pytest.approx(1 - 0.025 ** (1 / 60)))
    lo, hi = clopper_pearson(3, 60)
    assert 0 < lo < 3 / 60 < hi < 0.15
    assert collapse_rate([True, False, None, False]) == {"k": 1, "n": 3, "p": 1 / 3,
                                                         "lo": pytest.approx(0.00840, abs=1e-4),
                                                         "hi": pytest.approx(0.90570, abs=1e-4)}
    with pytest.raises(ValueError):
        clopper_pearson(2, 1)
