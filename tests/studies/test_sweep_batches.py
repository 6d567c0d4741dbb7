"""Runs travel in batches (issue 33): the split of a sweep's runs into batches,
and results that do not depend on it: one worker in process, two pool workers
forked from the sweep process, two forked from a forkserver, all the same
bytes (results.csv without its timing columns, every run folder's files but
timing.json)."""
from __future__ import annotations

from pathlib import Path

import pytest

from meshsim.sweep import plan_sweep, run_sweep
from meshsim.sweep.executors import make_executor
from meshsim.sweep.results import TIMING, comparable_results
from meshsim.sweep.worker import BATCH_MAX, batch_sizes, split

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "scenarios" / "sweeps" / "alpha-beta-staggered-6.yaml"


@pytest.mark.parametrize("n", [0, 1, 2, 5, 7, 40, 128, 3000])
@pytest.mark.parametrize("workers", [1, 2, 3, 16])
def test_batches_cover_every_run_once_largest_first_and_end_in_single_runs(n, workers):
    sizes = batch_sizes(n, workers)
    assert sum(sizes) == n and all(1 <= k <= BATCH_MAX for k in sizes)
    assert sizes == sorted(sizes, reverse=True)  # guided: never a big batch after a small one
    if n >= 2 * workers:  # enough runs: the last batches are single runs, no worker waits on a big one
        assert sizes[-workers:] == [1] * workers
    tasks = list(range(n))
    batches = split(tasks, workers)
    assert [len(b) for b in batches] == sizes and [t for b in batches for t in b] == tasks


def test_batch_sizes_of_the_bench_grids():
    assert batch_sizes(128, 2)[:10] == [8] * 10  # few messages while the runs are many
    assert batch_sizes(128, 16)[0] == 4  # 16 workers: each gets work from the first 16 batches
    assert len(batch_sizes(128, 16)) >= 2 * 16
    assert batch_sizes(40, 2)[0] == BATCH_MAX


def _files(out: Path) -> dict[str, bytes]:
    return {str(f.relative_to(out)): f.read_bytes() for f in sorted((out / "runs").rglob("*"))
            if f.is_file() and f.name != TIMING}


# 2-6 s end to end: with the slow checks (README's 2-minute budget), which .ci/run runs
@pytest.mark.slow
def test_one_worker_and_two_workers_in_batches_give_the_same_bytes(tmp_path, monkeypatch):
    # 2 points x 4 seeds = 8 runs: batches of 2, then single runs, on 2 workers
    plan = plan_sweep(SWEEP, ["protocol.params.alpha=1.0,1.6", "protocol.params.beta=2.5"], seeds="1-4", smoke=True)
    assert len(plan.runs) == 8 and max(batch_sizes(8, 2)) == 2
    outs = {}
    for name, workers, start in (("inline", 1, None), ("fork", 2, "fork"), ("forkserver", 2, "forkserver")):
        if start:
            monkeypatch.setenv("MESHSIM_POOL_START", start)
        res = run_sweep(plan, tmp_path / name, workers=workers, quiet=True)
        assert res.ok == 8 and res.failed == 0
        outs[name] = tmp_path / name
    base = comparable_results(outs["inline"])
    files = _files(outs["inline"])
    assert len(files) >= 16 and base.count("\n") == 9  # header + 8 runs
    for name in ("fork", "forkserver"):
        assert comparable_results(outs[name]) == base, name
        assert _files(outs[name]) == files, name


def test_pool_workers_take_several_runs_each(monkeypatch):
    """Batches reach the workers whole: 8 runs on 2 workers come back from at most 2 processes, each run once."""
    plan = plan_sweep(SWEEP, ["protocol.params.alpha=1.0,1.6", "protocol.params.beta=2.5"], seeds="1-4", smoke=True)
    tasks = [{"point": p.key, "seed": s, "scenario": p.data, "source": plan.source, "base_dir": str(plan.base_dir),
              "level": "summary", "resolved": None} for p in plan.points for s in plan.seeds]
    monkeypatch.setenv("MESHSIM_POOL_START", "fork")
    ex = make_executor("local", 2)
    try:
        assert ex.start == "fork"  # type: ignore[attr-defined]
        got = list(ex.run(tasks))
    finally:
        ex.close()
    assert sorted((r["point"], r["seed"]) for r in got) == sorted((t["point"], t["seed"]) for t in tasks)
    assert all(r["status"] == "ok" for r in got)
    pids = {r["clock"][0] for r in got}
    assert 1 <= len(pids) <= 2
