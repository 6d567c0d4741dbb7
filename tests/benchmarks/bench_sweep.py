"""meshsim sweep: the same 40-run sweep with 1 and with 2 workers, and the speed-up.

The sweep: scenarios/sweeps/alpha-beta-staggered-6.yaml (six agents, 630
tasks, staggered degradation and recovery), alpha in {1.0, 1.2, 1.4, 1.6} x
beta in {2.5, 3.0}, seeds 1-5: 8 points x 5 seeds = 40 runs of about a CPU
second each. Run first with --workers 1 (in this process, as `meshsim sweep
--workers 1` does), then on a process pool of 2 workers, each into a fresh
folder; prints both wall times, the speed-up measured in this one run, the
load average around it (the machine is shared: a loaded machine cannot show
a 2-core speed-up) and whether the two results.csv are byte-identical.
Goal: >= 1.7 on 2 cores.

Run: python tests/benchmarks/bench_sweep.py [--workers N] [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from meshsim.sweep import plan_sweep, run_sweep

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "scenarios" / "sweeps" / "alpha-beta-staggered-6.yaml"
GRID = ["protocol.params.alpha=1.0,1.2,1.4,1.6", "protocol.params.beta=2.5,3.0"]


def timed(plan, out: Path, workers: int) -> float:
    t0 = time.perf_counter()
    res = run_sweep(plan, out, workers=workers, quiet=True)
    wall = time.perf_counter() - t0
    if res.failed or res.ok != len(plan.runs):
        sys.exit(f"bench_sweep: {res.failed} runs failed")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="workers of the second sweep (default 2)")
    ap.add_argument("--quick", action="store_true", help="smoke-size runs (210 tasks): checks the bench runs")
    args = ap.parse_args()
    plan = plan_sweep(SWEEP, GRID, seeds="1-5", smoke=args.quick)
    n = len(plan.runs)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="meshsim-bench-sweep-") as tmp:
        one = timed(plan, Path(tmp) / "w1", 1)
        many = timed(plan, Path(tmp) / f"w{args.workers}", args.workers)
        same = (Path(tmp) / "w1" / "results.csv").read_bytes() == \
            (Path(tmp) / f"w{args.workers}" / "results.csv").read_bytes()
    load1 = os.getloadavg()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"sweep of {n} runs ({len(plan.points)} points x {len(plan.seeds)} seeds, "
          f"{'smoke-size' if args.quick else 'full-size'} staggered MeshHeal runs) on {cpus} CPUs")
    print(f"  1 worker : {one:7.1f} s  ({n / one:.2f} runs/s)")
    print(f"  {args.workers} workers: {many:7.1f} s  ({n / many:.2f} runs/s)")
    print(f"  speed-up : {one / many:.2f}  (goal >= 1.7 on 2 cores)")
    print(f"  load average (1/5/15 min) before {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, "
          f"after {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f}")
    print(f"  results.csv identical with 1 and {args.workers} workers: {'yes' if same else 'NO'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
