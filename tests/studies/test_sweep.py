"""``meshsim sweep`` (issue 11): spec parsing, skipped points, byte-identity
with ``meshsim run``, executors (process pool, Dask LocalCluster), resume
after SIGKILL, refusals, tidy results, figures and the report.

Every sweep here is smoke-sized (the staggered schedule on 210 tasks, about
0.3 s a run), so the whole file stays within seconds.
"""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.core.errors import InputError
from meshsim.sweep import load_results, plan_sweep, run_sweep
from meshsim.sweep.results import TIMING_COLUMNS, comparable_results
from meshsim.sweep.spec import parse_values

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
AB6 = str(ROOT / "scenarios" / "sweeps" / "alpha-beta-staggered-6.yaml")
GRID = ["--grid", "protocol.params.alpha=1.0:2.0:0.5", "--grid", "protocol.params.beta=1.5,2.5"]


def _sweep(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meshsim.cli", "sweep", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


# ----------------------------------------------------------------------------------- the spec


def test_ranges_are_exact_decimals_and_inclusive():
    w = {"field": "--grid"}
    assert parse_values("0.8:2.0:0.2", w) == [0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
    assert parse_values("2:8:2", w) == [2, 4, 6, 8] and all(isinstance(v, int) for v in parse_values("2:8:2", w))
    assert parse_values("0:0.3:0.05", w)[-1] == 0.3 and len(parse_values("0:0.3:0.05", w)) == 7
    assert parse_values("1.5,2,3", w) == [1.5, 2, 3]
    assert parse_values("[1, {a: 2}]", w) == [1, {"a": 2}]
    assert parse_values([0.1, 0.2], w) == [0.1, 0.2] and parse_values("7", w) == [7]


@pytest.mark.parametrize("text", ["0.8:2.0", "a:b:c", "1:2:0", "2:1:0.5", "1:2:-1", "", "1,,2", "[]"])
def test_malformed_values_are_input_errors(text):
    with pytest.raises(InputError):
        parse_values(text, {"field": "--grid"})


def test_zipped_axes_vary_together_and_the_grid_multiplies():
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2.5,3"],
                      ["protocol.params.window=4,8", "protocol.params.min_obs=2,5"], seeds="1-2", smoke=True)
    got = [(p.values["protocol.params.beta"], p.values["protocol.params.window"], p.values["protocol.params.min_obs"])
           for p in plan.points]
    assert got == [(2.5, 4, 2), (2.5, 8, 5), (3.0, 4, 2), (3.0, 8, 5)]
    assert plan.seeds == [1, 2] and len(plan.runs) == 8


def test_invalid_points_are_skipped_with_their_reason_not_a_crash():
    plan = plan_sweep(STAGGERED, GRID[1::2], smoke=True)
    skipped = [(s["values"]["protocol.params.alpha"], s["values"]["protocol.params.beta"]) for s in plan.skipped]
    assert skipped == [(1.5, 1.5), (2.0, 1.5)]
    assert all("alpha must be < beta" in s["reason"] for s in plan.skipped)
    assert len(plan.points) == 4
    # values are stored as the resolved scenario holds them (beta 2 and 2.0 are one point)
    dup = plan_sweep(STAGGERED, ["protocol.params.beta=2,2.0,3"], smoke=True)
    assert [p.values["protocol.params.beta"] for p in dup.points] == [2.0, 3.0]


def test_shipped_sweeps_plan_with_their_stated_sizes():
    sizes = {}
    for f in sorted((ROOT / "scenarios" / "sweeps").glob("*.yaml")):
        plan = plan_sweep(f)
        sizes[f.stem] = (len(plan.points), len(plan.seeds), len(plan.skipped))
        small = plan_sweep(f, smoke=True)
        assert len(small.runs) <= 8, f
    assert sizes["alpha-beta-96"] == (31, 5, 4)  # the acceptance sweep: >= 30 points x 5 seeds
    assert sizes["alpha-beta-staggered-6"] == (31, 5, 4)
    assert sizes["link-loss-96"][0] == 7 and sizes["window-min-obs"][0] == 25
    assert sizes["reviewer-quality"][0] == 18


def test_a_separate_sweep_file_names_its_scenario(tmp_path):
    f = tmp_path / "ab.yaml"
    f.write_text(f"scenario: {STAGGERED}\nsweep:\n  grid: {{protocol.params.beta: [2.5, 3]}}\n  seeds: [4]\n")
    plan = plan_sweep(f)
    assert [p.values["protocol.params.beta"] for p in plan.points] == [2.5, 3.0] and plan.seeds == [4]
    f.write_text(f"scenario: {STAGGERED}\nsweep:\n  grid: {{protocol.params.beta: [2.5]}}\n  bogus: 1\n")
    with pytest.raises(InputError, match="sweep.bogus"):
        plan_sweep(f)


# ----------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("args,needle", [
    (["--grid", "protocol.params.alpah=1:2:0.5"], "unknown path"),
    (["--grid", "protocol.nope.x=1,2"], "unknown path"),
    (["--grid", "backend.overrides.models.strong.review.nope=0.5"], "unknown path"),
    ([], "empty grid"),
    (["--grid", "protocol.params.alpha="], "empty grid"),
    (["--grid", "protocol.params.alpha=0.8:2.0"], "malformed range"),
    (["--grid", "protocol.params.alpha=2.0:0.8:0.2"], "malformed range"),
    (["--grid", "protocol.params.alpha=3:4:1"], "every point of the grid fails validation"),
    (["--grid", "protocol.params.alpha=1,2", "--seeds", "9-1"], "--seeds"),
    (["--grid", "seeds=1,2"], "--seeds"),
    (["--grid", "protocol.params.alpha=1,2", "--scheduler", "tcp://127.0.0.1:9"], "--executor dask"),
])
def test_bad_sweep_input_is_one_line_exit_2(args, needle, tmp_path):
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--out", str(tmp_path / "s"), *args])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and not res.stdout, res.output
    assert not (tmp_path / "s").exists(), "a refused sweep must write nothing"


def test_unreachable_scheduler_fails_fast_with_one_line(tmp_path):
    pytest.importorskip("distributed")
    import distributed  # noqa: F401  (imported before the clock starts)

    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5",
                                    "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9",
                                    "--out", str(tmp_path / "s")])
    assert time.monotonic() - t0 < 12  # nothing listening: refused at once; else CONNECT_TIMEOUT (3 s)
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --scheduler: cannot reach the Dask scheduler") and "tcp://127.0.0.1:9" in line
    assert not (tmp_path / "s").exists()


# ----------------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    """4 valid points (2 skipped) x 2 seeds on a process pool of 2."""
    out = tmp_path_factory.mktemp("sweep") / "ab"
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", *GRID, "--seeds", "1-2", "--workers", "2",
                                    "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output + res.stderr
    return out, res.output


def test_skipped_points_are_listed_at_the_start(small_sweep):
    _out, text = small_sweep
    lines = text.splitlines()
    assert lines[1] == "skipped 2 invalid points:"
    assert lines[2].startswith("  alpha=1.5 beta=1.5: ") and "alpha must be < beta" in lines[2]


def test_per_run_summaries_match_meshsim_run_byte_for_byte(small_sweep, tmp_path):
    out, _ = small_sweep
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["runs"]) == 8
    for key, seed in (man["runs"][0], man["runs"][-1]):
        vals = man["points"][key]
        d = tmp_path / f"{key}-{seed}"
        sets = [x for p, v in vals.items() for x in ("--set", f"{p}={v}")]
        res = CliRunner().invoke(main, ["run", STAGGERED, "--smoke", "--seed", str(seed), "-q", "--out", str(d),
                                        *sets])
        assert res.exit_code == 0, res.output
        run_dir = out / "runs" / key / f"seed-{seed}"
        assert (run_dir / "summary.json").read_bytes() == (d / "summary.json").read_bytes()
        assert (run_dir / "scenario.resolved.yaml").read_bytes() == (d / "scenario.resolved.yaml").read_bytes()
        # the lean output level: summary only, no per-record tables
        assert sorted(p.name for p in run_dir.iterdir()) == ["scenario.resolved.yaml", "summary.json", "timing.json"]


def test_results_are_tidy(small_sweep):
    out, _ = small_sweep
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8
    head = list(rows[0])
    assert head[:6] == ["protocol.params.alpha", "protocol.params.beta", "seed", "point", "status", "error"]
    assert {"detection.delay_mean", "detection.false_isolation_rate", "agents.A5.detection_delay",
            "accuracy.overall"} <= set(head)
    order = [(float(r["protocol.params.alpha"]), float(r["protocol.params.beta"]), int(r["seed"])) for r in rows]
    assert order == sorted(order)
    summ = json.loads((out / "runs" / rows[0]["point"] / "seed-1" / "summary.json").read_text())
    assert float(rows[0]["detection.delay_mean"]) == summ["detection"]["delay_mean"]
    with open(out / "summary.csv") as fh:
        prow = [r for r in csv.DictReader(fh) if r["metric"] == "accuracy.overall"]
    assert len(prow) == 4 and prow[0]["runs"] == "2" and prow[0]["n"] == "2"
    a = [float(r["accuracy.overall"]) for r in rows if r["point"] == prow[0]["point"]]
    assert float(prow[0]["mean"]) == pytest.approx(sum(a) / 2)
    assert float(prow[0]["min"]) == min(a) and float(prow[0]["max"]) == max(a)


def test_each_run_has_its_wall_and_cpu_seconds_apart_from_the_compared_outputs(small_sweep):
    """Timings are measured in the worker, kept in the run's timing.json and shown in results.csv; the
    summaries and summary.csv do not hold them (they stay byte-identical across executors and reruns)."""
    out, _ = small_sweep
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[6:8] == list(TIMING_COLUMNS)
    for r in rows:
        wall, cpu = float(r["wall_seconds"]), float(r["cpu_seconds"])
        assert 0.01 < wall < 60 and 0.01 < cpu < 60, r  # a smoke run takes about 0.3 s
        t = json.loads((out / "runs" / r["point"] / f"seed-{r['seed']}" / "timing.json").read_text())
        assert t == {"wall_seconds": wall, "cpu_seconds": cpu}
        assert "seconds" not in (out / "runs" / r["point"] / f"seed-{r['seed']}" / "summary.json").read_text()
    with open(out / "summary.csv") as fh:
        assert not {r["metric"] for r in csv.DictReader(fh)} & set(TIMING_COLUMNS)
    text = comparable_results(out)
    assert "wall_seconds" not in text and text.count("\n") == 9


def test_load_results_gives_a_dataframe(small_sweep):
    pd = pytest.importorskip("pandas")
    out, _ = small_sweep
    df = load_results(out)
    assert isinstance(df, pd.DataFrame) and len(df) == 8
    assert df["detection.delay_mean"].dtype.kind == "f" and set(df["status"]) == {"ok"}
    pts = load_results(out, which="points")
    assert set(pts["metric"]) >= {"detection.missed_rate"} and len(pts[pts["metric"] == "accuracy.overall"]) == 4
    import meshsim

    assert meshsim.load_results(out).equals(df)
    if __import__("importlib").util.find_spec("pyarrow"):
        pq = pd.read_parquet(out / "results.parquet")
        assert list(pq.columns) == list(df.columns) and len(pq) == 8


def test_rerun_resumes_and_a_new_grid_extends_the_folder(small_sweep, tmp_path):
    import shutil

    out = tmp_path / "ab"
    shutil.copytree(small_sweep[0], out)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("summary.json")}
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", *GRID, "--seeds", "1-2", "--out", str(out)])
    assert res.exit_code == 0 and "8 runs: 8 finished (8 resumed), 0 failed" in res.output, res.output
    assert {p: p.stat().st_mtime_ns for p in out.rglob("summary.json")} == before
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.alpha=1.0",
                                    "--grid", "protocol.params.beta=2.5,3", "--seeds", "1-2", "--out", str(out),
                                    "--workers", "1"])
    assert res.exit_code == 0 and "4 runs: 4 finished (2 resumed)" in res.output, res.output
    assert {p: p.stat().st_mtime_ns for p in before} == before  # nothing rerun
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 10 and len({r["point"] for r in rows}) == 5


@pytest.mark.parametrize("change,needle", [
    (["--set", "protocol.params.window=16"], "protocol.params.window is unset there and 16 here"),
    (["--output", "full"], "output level"),
])
def test_changing_anything_but_the_grid_is_refused(small_sweep, change, needle):
    out, _ = small_sweep
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", *GRID, "--seeds", "1-2", "--out", str(out),
                                    *change])
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and needle in res.stderr and not res.stdout, res.output


def test_output_levels_keep_what_they_say(tmp_path):
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2.5"], seeds="1", sets=["tasks.count=210"], smoke=True,
                      output="records")
    run_sweep(plan, tmp_path / "r", workers=1, quiet=True)
    (d,) = (tmp_path / "r" / "runs").glob("*/seed-1")
    assert sorted(p.name for p in d.iterdir()) == ["events.jsonl.gz", "scenario.resolved.yaml", "states.jsonl.gz",
                                                     "summary.json", "tasks.jsonl.gz", "timing.json"]


def test_a_failing_run_is_recorded_and_the_exit_code_counts_failures(tmp_path, monkeypatch):
    from meshsim.simulate import runner

    real = runner.run_one

    def flaky(sc, seed, *a, **kw):
        if seed == 2:
            raise RuntimeError("boom in seed 2")
        return real(sc, seed, *a, **kw)

    monkeypatch.setattr(runner, "run_one", flaky)
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5,3",
                                    "--seeds", "1-2", "--workers", "1", "--out", str(tmp_path / "f"), "-q"])
    assert res.exit_code == 102, res.output  # 100 + two failed runs
    assert "4 runs: 2 finished (0 resumed), 2 failed" in res.output
    with open(tmp_path / "f" / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    bad = [r for r in rows if r["status"] == "failed"]
    assert [r["seed"] for r in bad] == ["2", "2"] and "boom in seed 2" in bad[0]["error"]
    err = (tmp_path / "f" / "runs" / bad[0]["point"] / "seed-2" / "error.txt").read_text()
    assert err.startswith("internal error: RuntimeError: boom in seed 2") and "Traceback" in err
    # the rerun retries the failed runs only
    monkeypatch.setattr(runner, "run_one", real)
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5,3",
                                    "--seeds", "1-2", "--workers", "1", "--out", str(tmp_path / "f"), "-q"])
    assert res.exit_code == 0 and "4 runs: 4 finished (2 resumed), 0 failed" in res.output


def test_progress_is_plain_lines_off_a_terminal(tmp_path):
    res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=2.5,3",
                                    "--seeds", "1", "--workers", "1", "--out", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("sweep: ")]
    assert lines[-1].startswith("sweep: 2/2 runs, ") and "runs/s" in lines[-1] and "\x1b" not in res.stderr


@pytest.mark.slow  # ~5 s; README's test command stays under 2 minutes
def test_dask_localcluster_and_the_process_pool_give_identical_results(small_sweep, tmp_path):
    pytest.importorskip("distributed")
    out, _ = small_sweep
    res = _sweep(STAGGERED, "--smoke", *GRID, "--seeds", "1-2", "--executor", "dask", "--scheduler", "local",
                 "--workers", "2", "--out", str(tmp_path / "dask"), timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Dask distributed on a LocalCluster" in res.stderr
    assert comparable_results(tmp_path / "dask") == comparable_results(out)  # all but the seconds
    assert (tmp_path / "dask" / "summary.csv").read_bytes() == (out / "summary.csv").read_bytes()


@pytest.mark.slow  # ~5 s; README's test command stays under 2 minutes
def test_sigkill_mid_sweep_then_rerun_gives_the_uninterrupted_results(small_sweep, tmp_path):
    out, _ = small_sweep
    dest = tmp_path / "killed"
    cmd = [sys.executable, "-m", "meshsim.cli", "sweep", STAGGERED, "--smoke", *GRID, "--seeds", "1-2",
           "--workers", "2", "--out", str(dest), "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(list(dest.glob("runs/*/seed-*/summary.json"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(dest.glob("runs/*/seed-*/summary.json")))
    assert 2 <= done < 8, f"the kill did not land mid-way ({done} of 8 runs done)"
    assert not (dest / "results.csv").exists()
    res = _sweep(STAGGERED, "--smoke", *GRID, "--seeds", "1-2", "--workers", "2", "--out", str(dest))
    assert res.returncode == 0, res.stderr
    assert comparable_results(dest) == comparable_results(out)
    assert len(list(dest.glob("runs/*/seed-*"))) == 8 and not list(dest.rglob("*.tmp"))


def test_a_folder_in_use_is_refused(small_sweep):
    import fcntl

    out, _ = small_sweep
    with open(out / ".sweep.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = CliRunner().invoke(main, ["sweep", STAGGERED, "--smoke", "--grid", "protocol.params.beta=4",
                                        "--seeds", "1-2", "--out", str(out)])
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert "in use by another meshsim sweep (" in line


# ----------------------------------------------------------------------------------- figures


def test_pareto_front_keeps_the_undominated():
    from meshsim.plots.sweeps import pareto_front

    pts = [{"a": 0, "b": 5}, {"a": 1, "b": 1}, {"a": 2, "b": 2}, {"a": 0, "b": 6}, {"a": 3, "b": 0}]
    assert pareto_front(pts, ("a", "b")) == [0, 1, 4]


# 2-6 s end to end: with the slow checks (README's 2-minute budget), which .ci/run runs
@pytest.mark.slow
def test_figures_and_report_of_a_sweep_folder(small_sweep, tmp_path):
    pytest.importorskip("matplotlib")
    out, _ = small_sweep
    r = CliRunner()
    for args, name in ((["--kind", "tradeoff"], "t.png"), (["--kind", "heatmap", "--x", "alpha", "--y", "beta",
                                                            "--metric", "false_isolation_rate"], "h.png"),
                       (["--kind", "sensitivity", "--x", "beta", "--metric", "detection.delay_p90"], "s.png")):
        res = r.invoke(main, ["plot", str(out), *args, "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output + res.stderr
        assert (tmp_path / name).stat().st_size > 1000
    bad = r.invoke(main, ["plot", str(out), "--kind", "heatmap", "--metric", "no_such_metric"])
    assert bad.exit_code == 2 and "--metric" in bad.stderr
    bad = r.invoke(main, ["plot", str(out), "--kind", "timeline"])
    assert bad.exit_code == 2
    res = r.invoke(main, ["report", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    text = (out / "report.html").read_text()
    assert text.count("<img") == 6 and "Skipped points" in text and "alpha must be &lt; beta" in text
    assert "Pareto" in text


def test_tradeoff_marks_the_pareto_points(small_sweep):
    from meshsim.plots.sweeps import open_sweep, tradeoff_points

    pts = tradeoff_points(open_sweep(small_sweep[0]))
    assert len(pts) == 4 and any(p["pareto"] for p in pts)
    front = [p for p in pts if p["pareto"]]
    for p in pts:  # no point beats a front point on every objective
        for f in front:
            assert not (p["fi"] <= f["fi"] and p["delay"] <= f["delay"] and p["missed"] <= f["missed"]
                        and (p["fi"], p["delay"], p["missed"]) != (f["fi"], f["delay"], f["missed"]))
