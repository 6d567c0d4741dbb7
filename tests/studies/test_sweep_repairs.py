"""Sweep repairs of issue 18: ``meshsim sweep --out DIR`` resumes from the
manifest without the grid, ``--dry-run`` lists done / pending / refused and
writes nothing, at least 5 seeds by default and a warning for one seed.
(Workers dying with the sweep: test_sweep_lifeline.py; timings: test_sweep.py.)
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshsim.cli import main
from meshsim.core.errors import InputError
from meshsim.sweep import MANIFEST, plan_sweep, resume_args
from meshsim.sweep.core import MIN_SEEDS
from meshsim.sweep.results import comparable_results

ROOT = Path(__file__).resolve().parents[2]
STAGGERED = str(ROOT / "scenarios" / "meshheal" / "staggered-math.yaml")
ARGS = ["--smoke", "--grid", "protocol.params.alpha=1.0,1.5", "--grid", "protocol.params.beta=1.5,2.5",
        "--seeds", "1-2", "--set", "protocol.params.window=6", "--workers", "1"]


def _sweep(*args: str):
    return CliRunner().invoke(main, ["sweep", *map(str, args)])


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(folder.rglob("*"))} if folder.exists() else {}


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """3 valid points (1 skipped: alpha=1.5, beta=1.5) x 2 seeds, finished."""
    out = tmp_path_factory.mktemp("rep") / "s"
    res = _sweep(STAGGERED, *ARGS, "--out", out, "-q")
    assert res.exit_code == 0, res.output + res.stderr
    return out


def test_out_alone_resumes_the_folders_last_command(done, tmp_path, monkeypatch):
    out = tmp_path / "s"
    shutil.copytree(done, out)
    lost = sorted(out.glob("runs/*/seed-2/summary.json"))[0]  # a run killed before it finished
    lost.unlink()
    (out / "results.csv").unlink()
    monkeypatch.chdir(tmp_path)  # the manifest keeps the scenario as an absolute path
    res = _sweep("--out", "s")
    assert res.exit_code == 0, res.output + res.stderr
    assert "6 runs: 6 finished (5 resumed), 0 failed" in res.output
    assert lost.is_file() and comparable_results(out) == comparable_results(done)
    args = resume_args(out)  # what the rerun used: the first command, unchanged
    assert args["path"] == STAGGERED and args["grid"] == ARGS[2:5:2] and args["seeds"] == "1-2"
    assert args["sets"] == ["protocol.params.window=6"] and args["smoke"] is True


def test_resuming_follows_the_folder_rules(done, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(done, out)
    # the grid and the seeds may change: the folder grows
    res = _sweep("--out", out, "--grid", "protocol.params.beta=3", "-q")
    assert res.exit_code == 0 and "2 runs: 2 finished (0 resumed)" in res.output, res.output + res.stderr
    assert len(json.loads((out / MANIFEST).read_text())["runs"]) == 8
    # anything else about the study is refused in one line naming the difference
    res = _sweep("--out", out, "--set", "protocol.params.window=16")
    assert res.exit_code == 2 and not res.stdout, res.output
    (line,) = res.stderr.strip().splitlines()
    assert "protocol.params.window is 6 there and 16 here" in line


def test_out_alone_needs_a_sweep_folder_made_with_its_command(done, tmp_path):
    res = _sweep("--out", tmp_path / "none")
    assert res.exit_code == 2 and "not a sweep folder" in res.stderr and len(res.stderr.splitlines()) == 1
    res = _sweep("--dry-run")
    assert res.exit_code == 2 and "SCENARIO" in res.stderr
    old = tmp_path / "old"
    shutil.copytree(done, old)
    m = json.loads((old / MANIFEST).read_text())
    del m["command"]  # a folder written before the manifest kept its command
    (old / MANIFEST).write_text(json.dumps(m))
    res = _sweep("--out", old)
    assert res.exit_code == 2 and "rerun the sweep command" in res.stderr, res.stderr
    with pytest.raises(InputError, match="rerun the sweep command"):
        resume_args(old)


def test_dry_run_lists_done_pending_and_skipped_and_writes_nothing(done, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(done, out)
    (sorted(out.glob("runs/*/seed-2/summary.json"))[0]).unlink()
    before = _snapshot(out)
    res = _sweep(STAGGERED, *ARGS, "--seeds", "1-3", "--out", out, "--dry-run")
    assert res.exit_code == 0, res.output + res.stderr
    lines = res.output.splitlines()
    assert lines[0].endswith("3 points x 3 seeds (seeds 1-3) = 9 runs -> " + f"{out}/")
    assert lines[1] == "skipped 1 invalid point:" and "alpha must be < beta" in lines[2]
    assert lines[3] == "5 done, 4 pending"
    states = [ln.split()[-5] if "partly" not in ln else "partly" for ln in lines[4:]]
    assert len(lines[4:]) == 3 and states.count("partly") == 3, lines
    assert sum("pending seeds 2,3" in ln for ln in lines[4:]) == 1
    assert sum("pending seed 3" in ln for ln in lines[4:]) == 2
    assert _snapshot(out) == before
    # a fresh folder: nothing is created
    res = _sweep(STAGGERED, *ARGS, "--out", tmp_path / "new", "--dry-run")
    assert res.exit_code == 0 and "0 done, 6 pending" in res.output and not (tmp_path / "new").exists()


def test_dry_run_shows_a_refused_change_of_the_study(done):
    before = _snapshot(done)
    res = _sweep(STAGGERED, *ARGS[:-4], "--set", "protocol.params.window=8", "--workers", "1", "--out", done,
                 "--dry-run")
    assert res.exit_code == 2, res.output
    assert [ln.split()[-1] for ln in res.stdout.splitlines()[3:]] == ["refused"] * 3, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: ") and "protocol.params.window is 6 there and 8 here" in line
    assert _snapshot(done) == before
    # resuming the folder with a dry run: everything done, nothing would run
    res = _sweep("--out", done, "--dry-run")
    assert res.exit_code == 0 and "6 done, 0 pending (nothing would run)" in res.output, res.output


def test_at_least_five_seeds_by_default_and_a_warning_for_one(tmp_path):
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2.5,3"], sets=["seeds=1"], smoke=True)
    assert MIN_SEEDS == 5 and plan.seeds == [1, 2, 3, 4, 5] and not plan.warnings
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2.5"], sets=["seeds=[7, 9]"], smoke=True)
    assert plan.seeds == [7, 9, 10, 11, 12]  # the scenario's own seeds, topped up
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2.5"], sets=["seeds=6"], smoke=True)
    assert len(plan.seeds) == 6
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2.5"], seeds="count:3", smoke=True)  # a count: as asked
    assert plan.seeds == [1, 2, 3]
    plan = plan_sweep(STAGGERED, ["protocol.params.beta=2.5"], seeds="3", smoke=True)  # one seed, never 3 seeds
    assert plan.seeds == [3]
    f = tmp_path / "one.yaml"  # a sweep section that says one seed gets one, with a warning
    f.write_text(f"scenario: {STAGGERED}\nsweep:\n  grid: {{protocol.params.beta: [2.5, 3]}}\n  seeds: [4]\n")
    plan = plan_sweep(f, smoke=True)
    assert plan.seeds == [4] and "statistics need seeds" in plan.warnings[0]
    res = _sweep(f, "--smoke", "--out", tmp_path / "w", "--dry-run")
    assert res.exit_code == 0 and "warning: one seed per point (seed 4)" in res.stderr
