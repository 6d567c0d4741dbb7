"""``meshsim verdict`` (issue 29, item 1): the constraint grammar and how each
form is judged, exact intervals, held-out seeds disjoint from the search's,
the budget checked before anything runs, byte-identical verdict.json across
invocations, resume after ``kill -9`` redoing no finished run, PASS and FAIL.

The runs are persistent-math's smoke size (6 agents, 84 tasks, about 0.2 s a
run) at 3 held-out seeds and 2 assumption samples x 2 seeds: 7 runs.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from meshsim.cli import main
from meshsim.core.errors import InputError
from meshsim.verdict import MEASURES, parse_constraint
from meshsim.verdict.constraints import holds_at, judge
from meshsim.verdict.measures import clopper_pearson, runs_to_show

ROOT = Path(__file__).resolve().parents[2]
SIX = str(ROOT / "scenarios" / "meshheal" / "persistent-math.yaml")
ARGS = [SIX, "--smoke", "--seeds", "70001-70003", "--samples", "2", "--band-seeds", "2", "--workers", "1", "-q"]
RUNS = 3 + 2 * 2


def _cli(*args: str):
    return CliRunner().invoke(main, ["verdict", *args])


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("verdict") / "v"
    res = _cli(*ARGS, "--out", str(out), "--constraint", "detection.missed==0",
               "--constraint", "false_isolations_per_healthy<=0.01")
    assert res.exit_code in (0, 4), res.output
    return out


# ----------------------------------------------------------------------------------- intervals


@settings(max_examples=40)
@given(n=st.integers(1, 300), data=st.data())
def test_clopper_pearson_holds_the_estimate_and_is_exact_at_zero(n, data):
    k = data.draw(st.integers(0, n))
    lo, hi = clopper_pearson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    if k == 0:  # the closed form of the exact upper bound with no event
        assert lo == 0.0 and math.isclose(hi, 1.0 - 0.025 ** (1.0 / n), rel_tol=1e-9)
    # the defining tails, summed exactly: P(X >= k | lo) = 0.025 and P(X <= k | hi) = 0.025
    def tail(p: float, ks: range) -> float:
        return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in ks)

    if k > 0:
        assert math.isclose(tail(lo, range(k, n + 1)), 0.025, rel_tol=1e-6)
    if k < n:
        assert math.isclose(tail(hi, range(0, k + 1)), 0.025, rel_tol=1e-6)


@pytest.mark.parametrize("bound", [0.01, 0.05, 0.3])
def test_runs_to_show_is_the_first_count_whose_upper_bound_meets_the_bound(bound):
    n = runs_to_show(bound)
    assert clopper_pearson(0, n)[1] <= bound < clopper_pearson(0, n - 1)[1]


# ----------------------------------------------------------------------------------- the grammar


@pytest.mark.parametrize("text, form, target, op, value", [
    ("P(collapse)<=0.01", "P", "collapse", "<=", 0.01),
    (" P( missed ) >= 0.5 ", "P", "missed", ">=", 0.5),
    ("detection.missed==0", "bound", "detection.missed", "==", 0.0),
    ("false_isolations_per_healthy<=0.01", "bound", "false_isolations_per_healthy", "<=", 0.01),
    ("max(delay_outputs)<=12", "max", "delay_outputs", "<=", 12.0),
    ("min(accuracy.by_phase.degraded)>=0.5", "min", "accuracy.by_phase.degraded", ">=", 0.5),
    ("mean(false_isolations)<=1e-1", "mean", "false_isolations", "<=", 0.1),
])
def test_constraint_forms_parse(text, form, target, op, value):
    c = parse_constraint(text)
    assert (c.form, c.target, c.op, c.value) == (form, target, op, value)
    assert parse_constraint(c.text) == c  # the printed text reads back the same


@pytest.mark.parametrize("text, says", [
    ("P(collapse)==0", "use <= or >="),
    ("P(meltdown)<=0.1", "unknown event"),
    ("P(collapse)<=1.5", "in [0, 1]"),
    ("false_isolations_per_healty<=0.01", "did you mean false_isolations_per_healthy"),
    ("collapse<=0.01", "write P(collapse)"),
    ("false_isolations<0.01", "unknown operator '<'"),
    ("detection.missed==zero", "must be a number"),
    ("detection.missed==", "missing the bound"),
    ("max()<=1", "needs a metric"),
    ("detection.missed<=inf", "finite"),
    ("just words", "expected TERM OP NUMBER"),
])
def test_a_bad_constraint_is_one_line_exit_2_and_writes_nothing(tmp_path, text, says):
    out = tmp_path / "v"
    res = _cli(*ARGS, "--out", str(out), "--constraint", text)
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --constraint: ") and says in line, line
    assert not out.exists()


def test_a_summary_path_that_names_no_number_is_refused_before_any_run(tmp_path):
    res = _cli(*ARGS, "--out", str(tmp_path / "v"), "--constraint", "detection.mised<=1")
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert "not a number of this scenario's summary.json" in line and "detection.missed" in line
    assert not (tmp_path / "v").exists()


# ----------------------------------------------------------------------------------- judging


def _runs(**cols):
    """Runs (seed, values) from columns of per-run values, seeds 1, 2, ..."""
    n = len(next(iter(cols.values())))
    return [(i + 1, {k.replace("__", "."): v[i] for k, v in cols.items()}) for i in range(n)]


def test_P_is_judged_on_the_exact_upper_bound_and_says_how_many_runs_would_show_it():
    runs = _runs(collapse__occurred=[0.0] * 10)
    j = judge(parse_constraint("P(collapse)<=0.01"), runs)
    assert j["result"] == "FAIL" and j["estimate"] == 0.0
    assert math.isclose(j["value"], 1 - 0.025 ** 0.1) and "368 runs without one" in j["why"]
    assert judge(parse_constraint("P(collapse)<=0.31"), runs)["result"] == "PASS"
    assert holds_at(parse_constraint("P(collapse)<=0.01"), runs) is True  # the point form, for the band


def test_every_run_forms_name_the_seeds_that_break_them():
    runs = _runs(detection__missed=[0.0, 2.0, 0.0, 1.0])
    j = judge(parse_constraint("detection.missed==0"), runs)
    assert j["result"] == "FAIL" and j["seeds"] == [2, 4] and j["why"].startswith("2 of 4 runs hold")
    j = judge(parse_constraint("max(missed)<=1"), runs)
    assert j["result"] == "FAIL" and j["seeds"] == [2] and j["value"] == 2.0
    assert judge(parse_constraint("max(missed)<=2"), runs)["result"] == "PASS"
    assert judge(parse_constraint("mean(missed)<=0.75"), runs)["result"] == "PASS"


def test_a_proportion_pools_its_counts_and_a_mean_needs_two_seeds():
    runs = _runs(detection__false_isolations=[1.0, 0.0, 0.0], detection__ever_healthy_agents=[96.0] * 3)
    j = judge(parse_constraint("false_isolations_per_healthy<=0.05"), runs)
    lo, hi = clopper_pearson(1, 288)
    assert j["result"] == "PASS" and math.isclose(j["value"], hi) and math.isclose(j["estimate"], 1 / 288)
    assert j["why"].startswith("1 of 288")
    one = judge(parse_constraint("delay_outputs<=100"), _runs(detection__delay_outputs_mean=[5.0]))
    assert one["result"] == "FAIL" and "no interval" in one["why"]


@settings(max_examples=40)
@given(fi=st.lists(st.integers(0, 5), min_size=1, max_size=12), coll=st.data(),
       v=st.floats(0.0, 1.0), dv=st.floats(0.0, 0.5))
def test_a_looser_bound_never_turns_pass_into_fail(fi, coll, v, dv):
    """Judging is monotone in the bound, for every form (the verdict cannot be gamed by rounding)."""
    collapsed = coll.draw(st.lists(st.booleans(), min_size=len(fi), max_size=len(fi)))
    runs = _runs(detection__false_isolations=[float(x) for x in fi], detection__ever_healthy_agents=[6.0] * len(fi),
                 collapse__occurred=[float(c) for c in collapsed])
    for form in ("P(collapse)<={}", "false_isolations_per_healthy<={}", "max(false_isolations)<={}",
                 "mean(false_isolations)<={}", "false_isolations<={}"):
        scale = 1.0 if "P(" in form or "healthy" in form else 6.0
        tight = judge(parse_constraint(form.format(v * scale)), runs)["result"]
        loose = judge(parse_constraint(form.format(min(1.0, v + dv) * scale if "P(" in form else (v + dv) * scale)),
                      runs)["result"]
        assert not (tight == "PASS" and loose == "FAIL"), form


def test_every_measure_reads_a_field_the_summary_documents():
    doc = (ROOT / "docs" / "outputs.md").read_text()
    for m in MEASURES.values():
        for path in (m.count, m.of):
            if path:
                leaf = path.split(".")[-1]
                stem = leaf.replace("_mean", "")
                assert f"`{path}`" in doc or f"`{stem}" in doc or leaf in doc, path


# ----------------------------------------------------------------------------------- the command


def test_verdict_json_holds_each_measure_against_the_runs_it_came_from(folder):
    v = json.loads((folder / "verdict.json").read_text())
    (cell,) = v["cells"]
    assert cell["runs"] == 3 and cell["agents"] == 6 and v["seeds"]["held_out"] == [70001, 70002, 70003]
    runs = sorted((folder / cell["size"] / "runs").glob("*/seed-*/summary.json"))
    assert len(runs) == RUNS
    held = [json.loads(f.read_text()) for f in runs if f.parent.name in ("seed-70003",)]
    assert len(held) == 1  # seed 70003 runs only at the profile's values (the band runs the first 2)
    summaries = {}
    for f in runs:
        s = json.loads(f.read_text())
        summaries.setdefault(f.parent.parent.name, {})[s["seed"]] = s
    (key,) = [k for k, by in summaries.items() if len(by) == 3]
    by = summaries[key]
    fi = sum(s["detection"]["false_isolations"] for s in by.values())
    healthy = sum(s["detection"]["ever_healthy_agents"] for s in by.values())
    m = cell["measures"]["false_isolations_per_healthy"]
    assert (m["count"], m["of"]) == (fi, healthy)
    assert m["lo"] <= m["estimate"] <= m["hi"]
    worst = max(by.values(), key=lambda s: (s["detection"]["false_isolations"], -s["seed"]))
    assert cell["worst_seed"]["false_isolations"] == worst["detection"]["false_isolations"]
    assert cell["events"]["collapse"]["count"] == sum(s["collapse"]["occurred"] for s in by.values())
    assert cell["measures"]["delay_outputs"]["band"]["samples"] == 2
    md = (folder / "verdict.md").read_text()
    assert "| candidate | size | detection.missed==0 |" in md and "Clopper-Pearson" in md


@pytest.mark.slow  # (waits on deadlines or runs whole commands: the slow phase keeps it)
def test_pass_and_fail_are_both_reachable_and_set_the_exit_code(folder, tmp_path):
    import shutil

    v = json.loads((folder / "verdict.json").read_text())
    folder = Path(shutil.copytree(folder, tmp_path / "copy"))  # judged again with other constraints
    got = {j["constraint"]: j["result"] for j in v["cells"][0]["constraints"]}
    # the smoke stream's three seeds isolate healthy agents (3 of 18) and miss no degraded one
    assert got == {"detection.missed==0": "PASS", "false_isolations_per_healthy<=0.01": "FAIL"}
    res = _cli(*ARGS, "--out", str(folder), "--constraint", "max(detection.missed)<=0",
               "--constraint", "P(collapse)<=0.75")
    assert res.exit_code == 0, res.output
    assert "7 already done" in res.stdout and res.stdout.rstrip().splitlines()[-2] == "verdict: PASS"
    res = _cli(*ARGS, "--out", str(folder), "--constraint", "false_isolations_per_healthy<=0.01")
    assert res.exit_code == 4 and "verdict: FAIL" in res.stdout
    assert "false_isolations_per_healthy<=0.01 FAIL (judged on the 95 % Clopper-Pearson upper bound)" in res.stdout


def test_two_identical_invocations_write_byte_identical_verdicts(folder):
    """The same command twice gives the same bytes; a fresh folder from a killed and resumed run gives them
    too (test_sigkill_then_rerun_..., slow)."""
    args = ["--constraint", "detection.missed==0", "--constraint", "false_isolations_per_healthy<=0.01"]
    # the folder holds the fixture's verdict (other tests judge copies, or rerun this same command)
    first = (folder / "verdict.json").read_bytes(), (folder / "verdict.md").read_bytes()
    res = _cli(*ARGS, "--out", str(folder), *args)  # the fixture's own command, again
    assert res.exit_code == 4, res.output
    assert ((folder / "verdict.json").read_bytes(), (folder / "verdict.md").read_bytes()) == first
    assert str(folder) not in first[0].decode() and str(ROOT) not in first[0].decode()  # no path, no time


@pytest.mark.slow  # a fresh process and its imports: ~6 s on an idle 2-core machine
def test_sigkill_then_rerun_redoes_no_finished_run_and_gives_the_same_verdict(folder, tmp_path):
    dest = tmp_path / "killed"
    cmd = [sys.executable, "-m", "meshsim.cli", "verdict", *ARGS, "--out", str(dest),
           "--constraint", "detection.missed==0", "--constraint", "false_isolations_per_healthy<=0.01"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(list(dest.glob("*/runs/*/seed-*/summary.json"))) < 2:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = {f: f.stat().st_mtime_ns for f in dest.glob("*/runs/*/seed-*/summary.json")}
    assert 2 <= len(done) < RUNS, f"the kill did not land mid-way ({len(done)} of {RUNS} runs done)"
    assert not (dest / "verdict.json").exists()
    res = _cli(*ARGS[:-1], "--out", str(dest), "--constraint", "detection.missed==0",
               "--constraint", "false_isolations_per_healthy<=0.01")
    assert res.exit_code == 4, res.output
    assert f"{RUNS} runs, {len(done)} already done" in res.stdout
    assert all(f.stat().st_mtime_ns == t for f, t in done.items())  # no finished run was redone
    res = _cli(*ARGS, "--out", str(folder), "--constraint", "detection.missed==0",
               "--constraint", "false_isolations_per_healthy<=0.01")  # the uninterrupted one (resumed: no run)
    assert res.exit_code == 4, res.output
    assert (dest / "verdict.json").read_bytes() == (folder / "verdict.json").read_bytes()
    assert not list(dest.rglob("*.tmp"))


def test_the_budget_is_checked_before_anything_is_written(tmp_path):
    res = _cli(*ARGS, "--out", str(tmp_path / "v"), "--budget", str(RUNS - 1))
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --budget: ") and f"plans {RUNS} runs" in line
    assert not (tmp_path / "v").exists()


def test_dry_run_prints_the_planned_run_count_and_writes_nothing(tmp_path):
    res = _cli(*ARGS, "--out", str(tmp_path / "v"), "--dry-run")
    assert res.exit_code == 0, res.output
    assert f"= {RUNS} runs" in res.stdout and not (tmp_path / "v").exists()


def test_a_folder_that_holds_something_else_is_refused(tmp_path):
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "notes.txt").write_text("mine")
    res = _cli(*ARGS, "--out", str(tmp_path / "v"))
    assert res.exit_code == 2, res.output
    assert "holds no verdict" in res.stderr and sorted(p.name for p in (tmp_path / "v").iterdir()) == ["notes.txt"]


# ----------------------------------------------------------------------------------- held-out seeds


def _search_folder(root: Path, seeds: list[int]) -> Path:
    """A finished search folder as meshsim sweep --search leaves it (manifest, recommended.json, front.csv)."""
    d = root / "search"
    d.mkdir()
    pts = {"p-aaa": {"protocol.params.alpha": 0.9468, "protocol.params.beta": 4.239},
           "p-bbb": {"protocol.params.alpha": 1.2, "protocol.params.beta": 3.0}}
    manifest = {"format": "meshsim-sweep/1", "scenario": {"name": "meshheal-scale-96-sparse", "source": "x.yaml"},
                "base": {}, "axes": list(pts["p-aaa"]), "output": "summary", "points": pts, "skipped": [],
                "runs": [[k, s] for k in pts for s in seeds], "command": {},
                "search": {"seeds": seeds[:2], "sampler": "nsga2"}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "recommended.json").write_text(json.dumps({"rank": 2, "point": "p-aaa", "values": pts["p-aaa"],
                                                    "rule": "r", "seeds": len(seeds)}))
    (d / "front.csv").write_text("rank,point,trial\n1,p-bbb,3\n2,p-aaa,0\n")
    return d


def test_held_out_seeds_that_overlap_the_search_are_refused_in_one_line(tmp_path):
    d = _search_folder(tmp_path, [1, 2, 3, 70002])
    res = _cli(SIX, "--smoke", "--from", str(d), "--seeds", "70001-70003", "--out", str(tmp_path / "v"))
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --seeds: held-out seeds must be disjoint") and "70002 overlap" in line
    assert not (tmp_path / "v").exists()
    res = _cli(SIX, "--smoke", "--set", "protocol.params.beta=4", "--tuned-on", "1-7", "--seeds", "5,70001")
    assert res.exit_code == 2 and "5 overlap (--tuned-on names 1-7)" in res.stderr, res.output


def test_candidates_come_from_the_recommendation_then_the_front(tmp_path):
    d = _search_folder(tmp_path, [1, 2, 3])
    res = _cli(SIX, "--smoke", "--from", str(d), "--seeds", "70001-70003", "--samples", "0", "--dry-run",
               "--out", str(tmp_path / "v"))
    assert res.exit_code == 0, res.output
    assert "x 2 candidates (recommended, front-1)" in res.stdout and "= 6 runs" in res.stdout
    res = _cli(SIX, "--smoke", "--from", str(d), "--front", "0", "--seeds", "70001-70003", "--samples", "0",
               "--dry-run", "--out", str(tmp_path / "v"))
    assert "x 1 candidate (recommended)" in res.stdout and "= 3 runs" in res.stdout


def test_a_search_without_a_recommendation_is_refused(tmp_path):
    d = _search_folder(tmp_path, [1, 2])
    (d / "recommended.json").write_text("null\n")
    res = _cli(SIX, "--smoke", "--from", str(d), "--seeds", "70001-70003", "--dry-run")
    assert res.exit_code == 2 and "recommends nothing" in res.stderr, res.output


# ----------------------------------------------------------------------------------- assumption samples


def _study(root: Path, top: list[str], low: float = 0.02) -> Path:
    """A finished uncertainty folder's two files the verdict reads (uncertainty.json, samples.csv)."""
    d = root / "study"
    d.mkdir()
    factors = [{"name": "review.noise", "low": low, "high": 0.15}, {"name": "review.persist", "low": 0.0,
                                                                      "high": 0.9}]
    (d / "uncertainty.json").write_text(json.dumps({"format": "meshsim-uncertainty/1", "factors": factors,
                                                    "top": top, "profile": "backends/fake-default.yaml",
                                                    "scenario": {"name": "meshheal-persistent-math"}}))
    rows = ["sample,stage,trajectory,point,review.noise,review.persist", "0,base,,p-0,,"]
    rows += [f"{i},lhs,,p-{i},{0.1 * i:.1f},{0.05 * i:.2f}" for i in range(1, 6)]
    (d / "samples.csv").write_text("\n".join(rows) + "\n")
    return d


def test_bands_take_the_studys_own_samples_over_its_top_factors(tmp_path):
    from meshsim.verdict import plan_verdict

    plan = plan_verdict([SIX], seeds="70001-70003", bands=str(_study(tmp_path, ["review.noise"])), samples=3,
                        smoke=True)
    assert plan.positions == [{"review.noise": 0.1}, {"review.noise": 0.2}, {"review.noise": 0.3}]
    assert [f["name"] for f in plan.assumptions["factors"]] == ["review.noise"]
    (size,) = plan.sizes
    noise = sorted({p.values["backend.overrides.review.noise"] for p in size.band.values()})
    assert noise == pytest.approx([0.02 + u * 0.13 for u in (0.1, 0.2, 0.3)])


def test_a_study_whose_ranges_moved_is_refused(tmp_path):
    res = _cli(*ARGS, "--bands", str(_study(tmp_path, ["review.noise"], low=0.05)), "--dry-run")
    assert res.exit_code == 2 and "rerun the study" in res.stderr, res.output


def test_without_a_study_every_range_of_the_profile_is_sampled():
    from meshsim.verdict import plan_verdict

    plan = plan_verdict([SIX], seeds="70001-70003", samples=4, smoke=True, constraints=["P(collapse)<=0.5"])
    assert len(plan.positions) == 4 and len(plan.positions[0]) == len(plan.assumptions["factors"]) > 20
    assert all(0.0 <= u <= 1.0 for p in plan.positions for u in p.values())
    with pytest.raises(InputError, match="held-out seeds themselves"):
        plan_verdict([SIX], seeds=7, smoke=True)  # a count is never a list of held-out seeds


@pytest.mark.slow  # a Dask LocalCluster starts in ~5 s
def test_dask_gives_the_process_pools_verdict_byte_for_byte(folder, tmp_path):
    pytest.importorskip("distributed")
    args = ["--constraint", "detection.missed==0", "--constraint", "false_isolations_per_healthy<=0.01"]
    res = _cli(*ARGS, "--out", str(folder), *args)  # the fixture's verdict (resumed: no run)
    assert res.exit_code == 4, res.output
    res = _cli(*[a for a in ARGS if a not in ("--workers", "1")], "--executor", "dask", "--scheduler", "local",
               "--workers", "2", "--out", str(tmp_path / "d"), *args)
    assert res.exit_code == 4, res.output
    assert (tmp_path / "d" / "verdict.json").read_bytes() == (folder / "verdict.json").read_bytes()


@pytest.mark.parametrize("extra, says", [
    (["--front", "2"], "error: --front: --front chooses among a search's front points: it goes with --from"),
    (["--bands", "x", "--samples", "0"], "error: --bands: --bands gives assumption samples, --samples 0 asks"),
    (["--seeds", "70003-70001"], "error: --seeds: "),  # parse_seeds' own words (meshsim.scenario.fields)
])
def test_options_that_contradict_each_other_are_one_line(extra, says, tmp_path):
    res = _cli(*ARGS, *extra, "--out", str(tmp_path / "v"))  # the last --samples / --seeds counts
    assert res.exit_code == 2 and not (tmp_path / "v").exists(), res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(says), line


@pytest.mark.slow  # a real search (6 trials of the staggered smoke stream), then its verdict: ~20 s
def test_a_real_search_folder_gives_its_recommendation_and_its_seeds(tmp_path):
    pytest.importorskip("optuna")
    stag = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
    search = tmp_path / "search"
    res = CliRunner().invoke(main, ["sweep", stag, "--smoke", "--search", "optuna", "--range",
                                    "protocol.params.beta=2.0:4.5", "--minimize", "detection.delay_mean",
                                    "--minimize", "detection.false_isolation_rate", "--trials", "4", "--batch", "4",
                                    "--seeds", "1-2", "--workers", "1", "--out", str(search), "-q"])
    assert res.exit_code in (0, 100), res.output
    rec = json.loads((search / "recommended.json").read_text())
    used = {s for _k, s in json.loads((search / "manifest.json").read_text())["runs"]}
    res = _cli(stag, "--smoke", "--from", str(search), "--seeds", f"{max(used)}", "--dry-run")
    assert res.exit_code == 2 and "must be disjoint" in res.stderr, res.output
    out = tmp_path / "v"
    res = _cli(stag, "--smoke", "--from", str(search), "--front", "0", "--seeds", "70001-70002", "--samples", "0",
               "--workers", "1", "--out", str(out), "-q")
    assert res.exit_code in (0, 4), res.output
    v = json.loads((out / "verdict.json").read_text())
    assert v["candidates"] == [{"name": "recommended", "origin": f"recommended.json (front rank {rec['rank']})",
                                "values": rec["values"]}]
    assert v["seeds"]["search"] == sorted(used) and v["cells"][0]["runs"] == 2
    (resolved,) = {f.read_text() for f in out.glob("*/runs/*/seed-70001/scenario.resolved.yaml")}
    assert f"beta: {rec['values']['protocol.params.beta']}" in resolved
