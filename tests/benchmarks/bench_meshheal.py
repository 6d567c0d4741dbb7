"""MeshHeal at paper scale: 576 agents, sparse graph (1454 links), 48,384 tasks.

Runs scenarios/meshheal/scale-576-sparse.yaml (one third of the agents degrade
half-way) and prints tasks/s and wall time, plus the headline results.
Goal: <= 30 s on one core of the reference 2-core machine.

Run: python tests/benchmarks/bench_meshheal.py [--tasks N] [--scenario PATH]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import meshsim

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "meshheal" / "scale-576-sparse.yaml"))
    ap.add_argument("--tasks", type=int, default=None, help="shorten the stream (keeps the half-way degradation)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sets = []
    if args.tasks:
        half = args.tasks // 2
        sets = [f"tasks.count={2 * half}", f"phases=[{{name: healthy, tasks: {half}}}, {{name: degraded, tasks: {half}}}]",
                f"events=[{{at_task: {half + 1}, type: degrade, agents: targets}}]"]
    sc = meshsim.load_scenario(args.scenario, sets)
    t0 = time.perf_counter()
    c0 = time.process_time()
    res = meshsim.run(sc, seed=args.seed)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    s = res.summary
    n = s["tasks"]
    print(f"scenario   : {sc.name} ({s['network']['agents']} agents, {s['network']['links']} links, {n:,} tasks)")
    print(f"wall time  : {wall:.1f} s  (cpu {cpu:.1f} s)")
    print(f"throughput : {n / wall:,.0f} tasks/s  ({s['messages']['total']['sent'] / wall:,.0f} msgs/s)")
    print(f"accuracy   : {s['accuracy']['overall']:.3f}  by phase "
          + ", ".join(f"{k} {v:.3f}" for k, v in s['accuracy']['by_phase'].items()))
    degraded = len(s["agents"])
    isolated = sum(1 for a in s["agents"].values() if a["isolated_at"] is not None)
    print(f"isolation  : {isolated}/{degraded} degraded agents isolated, {s['false_isolations']} false isolations")


if __name__ == "__main__":
    main()
