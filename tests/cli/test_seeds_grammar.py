"""Seeds, one grammar (issue 29): every command that takes seeds reads them
through :func:`meshsim.scenario.fields.parse_seeds` — ``9931`` is that one seed, a count
is explicit (``count:5``), ``9301-9320`` and ``1,5,9`` are what they say — and a
plan of more than :data:`meshsim.scenario.fields.CONFIRM_RUNS` runs is refused before
any work without ``--yes``; the plan's run count is printed first.

Parsing only: dry runs, and the long-running callees replaced by recorders.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.cli import main
from meshsim.scenario.fields import CONFIRM_RUNS, check_plan_runs, parse_seeds, seed_list

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
SCALE576 = str(ROOT / "scenarios" / "meshheal" / "scale-576-sparse.yaml")
COMPARE = str(ROOT / "scenarios" / "compare" / "staggered-math.yaml")


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_exit_2(res, needle):
    assert res.exit_code == 2, res.output + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and needle in res.stderr, res.stderr


@pytest.mark.parametrize("text,want", [("9931", [9931]), (" 9931 ", [9931]), ("count:5", 5), ("count: 2", 2),
                                       ("1-3,7", [1, 2, 3, 7]), ("1,5,9", [1, 5, 9]), (5, 5), ([9931], [9931])])
def test_a_bare_number_is_one_seed_and_a_count_is_explicit(text, want):
    assert parse_seeds(text) == want


@pytest.mark.parametrize("text", ["count:0", "count:", "count:x", "5x", "count:100001", "x:5"])
def test_malformed_counts_are_refused(text):
    with pytest.raises(ValueError):
        parse_seeds(text)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=2 ** 63 - 1))
def test_any_single_seed_text_names_exactly_that_seed(s):
    assert seed_list(parse_seeds(str(s)), first=0) == [s]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=200), st.integers(min_value=0, max_value=10 ** 6))
def test_a_count_runs_consecutive_seeds_from_the_first(n, first):
    assert seed_list(parse_seeds(f"count:{n}"), first) == list(range(first, first + n))


def test_sweep_seeds_9931_plans_one_seed_per_point_not_9931(tmp_path):
    res = _invoke("sweep", SCALE576, "--grid", "protocol.params.beta=2,3", "--seeds", "9931", "--out",
                  tmp_path / "s", "--dry-run")
    assert res.exit_code == 0, res.output + res.stderr
    assert "2 points x 1 seed (seed 9931) = 2 runs" in res.output
    assert not (tmp_path / "s").exists()


def test_a_huge_sweep_is_refused_before_any_work_without_yes(tmp_path):
    res = _invoke("sweep", STAGGERED, "--grid", "protocol.params.beta=2,3", "--seeds", "count:9931", "--out",
                  tmp_path / "s", "--dry-run")
    _one_line_exit_2(res, f"19,862 runs, more than {CONFIRM_RUNS:,}; pass --yes")
    assert not (tmp_path / "s").exists()
    check_plan_runs(19_862, yes=True)  # --yes lets it through (a dry run of 19,862 runs takes minutes)
    check_plan_runs(CONFIRM_RUNS, yes=False)


def test_search_takes_the_grammar_and_counts_trials_and_refinement(tmp_path):
    pytest.importorskip("optuna")
    base = ["sweep", STAGGERED, "--smoke", "--search", "optuna", "--range", "protocol.params.beta=2.1:4",
            "--minimize", "detection.delay_mean", "--trials", "4", "--out", tmp_path / "s", "--dry-run"]
    res = _invoke(*base, "--seeds", "9931,9940")
    assert res.exit_code == 0, res.output + res.stderr
    assert "4 trials in batches of 4 x 2 seeds (seeds 9931,9940) = up to 8 runs" in res.output
    res = _invoke(*base, "--seeds", "count:3")
    assert "x 3 seeds (seeds 1-3)" in res.output, res.output
    big = [a if a != "4" else "4000" for a in base]  # 4000 trials x 3 seeds + a quarter more to refine
    _one_line_exit_2(_invoke(*big, "--seeds", "1-3"), "15,000 runs, more than 10,000; pass --yes")


def test_run_prints_its_plan_and_refuses_a_huge_one(tmp_path):
    res = _invoke("run", STAGGERED, "--smoke", "--seeds", "1-20000", "--set", "limits.seeds=100000", "--out",
                  tmp_path / "r")
    _one_line_exit_2(res, "20,000 runs")
    assert not (tmp_path / "r").exists()
    res = _invoke("run", STAGGERED, "--smoke", "--seeds", "12,9931", "--set", "tasks.count=30", "--set",
                  "phases=[]", "--set", "events=[]", "--set", "protocol.params.warmup=0", "--out", tmp_path / "r")
    assert res.exit_code == 0, res.output + res.stderr
    assert "2 runs (seeds 12,9931)" in res.stderr
    assert sorted(p.name for p in (tmp_path / "r").iterdir() if p.is_dir()) == ["seed-12", "seed-9931"]


def test_uncertainty_takes_the_grammar(tmp_path):
    res = _invoke("uncertainty", STAGGERED, "--smoke", "--budget", "300", "--seeds", "9931", "--dry-run",
                  "--out", tmp_path / "u")
    assert res.exit_code == 0, res.output + res.stderr
    assert "x 1 seeds (seed 9931)" in res.output
    res = _invoke("uncertainty", STAGGERED, "--smoke", "--budget", "300", "--seeds", "count:3", "--dry-run")
    assert "x 3 seeds (seeds 1-3)" in res.output, res.output
    _one_line_exit_2(_invoke("uncertainty", STAGGERED, "--seeds", "3-1", "--dry-run"), "--seeds")


def test_reproduce_takes_seed_lists(monkeypatch, tmp_path):
    import meshsim.paper.reproduce as rep
    from meshsim.paper.reproduce import experiments

    got = {}

    def fake(which, out, seeds, **kw):
        got["seeds"] = seeds
        raise SystemExit(0)

    monkeypatch.setattr(rep, "reproduce", fake)
    assert _invoke("reproduce", "meshheal", "--seeds", "9931,9940", "--out", tmp_path / "x").exit_code == 0
    assert got["seeds"] == [9931, 9940]
    assert _invoke("reproduce", "meshheal", "--out", tmp_path / "x").exit_code == 0
    assert got["seeds"] == 5  # the default, count:5, is seeds 1-5 as before
    _one_line_exit_2(_invoke("reproduce", "meshheal", "--seeds", "1-51"), "at most 50 seeds")
    _one_line_exit_2(_invoke("reproduce", "meshheal", "--seeds", "five"), "--seeds")
    exps = experiments("meshheal", [9931, 9940], quick=True)
    stag = next(e for e in exps if e.key == "staggered")
    assert [r.seed for runs in stag.runs.values() for r in runs] == [9931, 9940]
    assert {r.seed for e in exps for runs in e.runs.values() for r in runs} == {9931, 9940}
    assert [r.seed for r in next(e for e in experiments("meshheal", 2, quick=True)
                                 if e.key == "staggered").runs["staggered"]] == [1, 2]


def test_compare_takes_seed_lists_and_prints_its_plan(monkeypatch, tmp_path):
    import meshsim.paper.reproduce.compare as cmp

    got = {}

    def fake(paths, out, methods, seeds, *a, **kw):
        got["seeds"] = seeds
        raise SystemExit(0)

    monkeypatch.setattr(cmp, "run_comparison", fake)
    res = _invoke("compare", COMPARE, "--methods", "meshheal,autogen", "--seeds", "9931", "--out", tmp_path / "c")
    assert res.exit_code == 0, res.output + res.stderr
    assert got["seeds"] == [9931] and "2 methods x 1 scenario: 2 runs" in res.stderr
    res = _invoke("compare", COMPARE, "--methods", "meshheal", "--seeds", "count:3", "--out", tmp_path / "c")
    assert got["seeds"] == 3 and "1 methods x 1 scenario: 3 runs" in res.stderr
    _one_line_exit_2(_invoke("compare", COMPARE, "--seeds", "1-99"), "at most 50 seeds")


def test_compare_runs_exactly_the_listed_seeds(tmp_path):
    from meshsim.paper.reproduce.compare import method_runs

    assert [r.seed for r in method_runs(COMPARE, [9931, 7], ("meshheal",))["meshheal"]] == [9931, 7]
    assert [r.seed for r in method_runs(COMPARE, 2, ("meshheal",))["meshheal"]] == [1, 2]


def test_calibrate_takes_seed_lists(monkeypatch):
    import meshsim.paper.calibration as cal

    got = {}

    def fake(data, sc, seeds):
        got["seeds"] = list(seeds)
        raise SystemExit(0)

    monkeypatch.setattr(cal, "measure", fake)
    res = _invoke("backends", "calibrate", "fake-default", "--seeds", "9931,9940")
    assert res.exit_code == 0 and got["seeds"] == [9931, 9940], res.output + res.stderr
    assert "audit: 2 runs per profile evaluated (seeds 9931,9940)" in res.stderr
    _invoke("backends", "calibrate", "fake-default")
    assert got["seeds"] == [1, 2, 3, 4, 5]
    _one_line_exit_2(_invoke("backends", "calibrate", "fake-default", "--seeds", "count:101"), "at most 100")


def test_a_sweep_folder_made_when_a_bare_number_was_a_count_resumes_as_that_count(tmp_path):
    import json

    from meshsim.sweep.core import resume_args

    out = tmp_path / "old"
    out.mkdir()
    cmd = {"path": STAGGERED, "grid": ["protocol.params.beta=2.5"], "zip": [], "seeds": "3", "set": [],
           "output": None, "smoke": True}
    base = {"format": "meshsim-sweep/1", "base": {}, "axes": [], "output": "summary", "points": {"p-1": {}},
            "skipped": [], "command": cmd}
    (out / "manifest.json").write_text(json.dumps({**base, "runs": [["p-1", 1], ["p-1", 2], ["p-1", 3]]}))
    assert resume_args(out)["seeds"] == "count:3"
    (out / "manifest.json").write_text(json.dumps({**base, "runs": [["p-1", 3]]}))  # today's: seed 3
    assert resume_args(out)["seeds"] == "3"
