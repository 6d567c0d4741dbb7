"""meshsim sweep: one grid at several worker counts, its speed-ups, its overheads and a model of scaling.

Grids (scenarios/sweeps/alpha-beta-staggered-6.yaml: six agents, 630 tasks,
staggered degradation and recovery, runs of about half a CPU second):

- ``ab40``: alpha in {1.0, 1.2, 1.4, 1.6} x beta in {2.5, 3.0}, seeds 1-5 (8 points x 5 seeds = 40 runs);
- ``staggered128``: alpha in {1.0, 1.2, 1.4, 1.6} at beta = 3.0, seeds 1-32 (4 points x 32 seeds = 128
  runs; issue 33's 16-core table).

Each worker count runs the grid into a fresh folder (1 worker: in this
process, as ``meshsim sweep --workers 1`` does; more: the local process pool,
or ``--dask N``: a Dask LocalCluster of N workers). ``--repeat R`` runs every
worker count R times, interleaved (1, 2, ..., 1, 2, ...), and prints medians;
the speed-up is the median of the ratios of one repetition's pairs. The machine
may be shared: the load average is printed around the measurement.

Overheads, from timestamps (worker.run_task's ``clock``: pid, start, end on the
system-wide monotonic clock; the parent's writes, timed here around
``sweep.core.write_run``); nothing of it reaches the sweep folder:

- FIXED: from ``run_sweep``'s call to the first run's start (folder checks,
  expected files, pool or cluster start, workers' start-up and imports);
- TAIL: from the last result written to ``run_sweep``'s return (results tables, pool shutdown);
- PER-RUN: the wall a worker spends per run beyond the run's own CPU,
  ``(wall - fixed - tail) * workers / runs - cpu``, of which ``gap`` is the
  time a worker spends between two of its runs (messages, pickling) and
  ``write`` the parent's time writing one run's files.

The model (printed beside the measurement, docs/scaling.md "Many runs"):

    T(1) = F1 + n (c + o1)
    T(w) = F0 + f w + n (c + o) / w + c / 2          (w > 1)
    S(w) = T(1) / T(w)

with n runs of c CPU seconds each; F1 the serial part of the in-process sweep
(fixed + tail), F0 + f w the pool's (fitted to the measured worker counts;
with one pool size, f is its excess over F1 per worker); o1 and o the CPU
seconds per run spent outside the runs (the parent's bookkeeping and writing,
the workers' messages; measured in CPU so that a loaded machine does not
inflate it) in process and at the largest pool measured; c / 2 the expected
imbalance of the last, single-run batches. The parent handles every result:
T(w) is at least F0 + f w + n p, p its CPU seconds per run. The prediction is for idle cores, one per
worker.

Results: results.csv without its timing columns (results.comparable_results),
and every file of every run folder except timing.json, must be byte-identical
across worker counts; exits 1 when they are not.

Run: python tests/benchmarks/bench_sweep.py [--grid ab40|staggered128] [--workers 1,2] [--repeat N]
     [--dask N] [--quick] [--predict 2,4,8,16] [--fit 1,2] [--out FILE]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from meshsim.sweep import core as sweep_core
from meshsim.sweep import plan_sweep, run_sweep
from meshsim.sweep.results import TIMING, comparable_results

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "scenarios" / "sweeps" / "alpha-beta-staggered-6.yaml"
GRIDS = {
    "ab40": (["protocol.params.alpha=1.0,1.2,1.4,1.6", "protocol.params.beta=2.5,3.0"], "1-5"),
    "staggered128": (["protocol.params.alpha=1.0,1.2,1.4,1.6", "protocol.params.beta=3.0"], "1-32"),
}


class Probe:
    """The parent's writes and the workers' clocks of one sweep (wraps sweep.core.write_run)."""

    def __init__(self) -> None:
        self.clocks: list[tuple[int, float, float]] = []
        self.writes: list[tuple[float, float]] = []
        self.cpus: list[float] = []
        self.walls: list[float] = []
        self.cpu_first: Optional[float] = None  # this process's CPU seconds when the first result came
        self.cpu_last = 0.0  # ... and once the last was written
        self._orig = sweep_core.write_run

    def __enter__(self) -> "Probe":
        def write_run(out: Path, res: dict[str, Any], fmt: str) -> None:
            a = time.monotonic()
            if self.cpu_first is None:
                self.cpu_first = time.process_time()
            self._orig(out, res, fmt)
            self.writes.append((a, time.monotonic()))
            self.cpu_last = time.process_time()
            if res.get("clock"):
                self.clocks.append(tuple(res["clock"]))  # type: ignore[arg-type]
            if res.get("cpu") is not None:
                self.cpus.append(float(res["cpu"]))
                self.walls.append(float(res["wall"]))

        sweep_core.write_run = write_run  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: Any) -> None:
        sweep_core.write_run = self._orig  # type: ignore[assignment]


def one_sweep(plan, out: Path, workers: int, executor: str) -> dict[str, Any]:
    import resource

    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with Probe() as probe:
        t0 = time.monotonic()
        res = run_sweep(plan, out, executor=executor, workers=workers, quiet=True)
        t1 = time.monotonic()
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    n = len(plan.runs)
    if res.failed or res.ok != n:
        sys.exit(f"bench_sweep: {res.failed} runs failed")
    wall = t1 - t0
    # a meshsim before issue 33 sends no clock: its overheads read nan, its walls and results still count
    first = min((c[1] for c in probe.clocks), default=float("nan"))
    tail = t1 - max(w[1] for w in probe.writes)
    gaps: list[float] = []
    by_pid: dict[int, list[tuple[float, float]]] = {}
    for pid, a, b in probe.clocks:
        by_pid.setdefault(pid, []).append((a, b))
    for spans in by_pid.values():
        spans.sort()
        gaps += [spans[i + 1][0] - spans[i][1] for i in range(len(spans) - 1)]
    cpu = statistics.fmean(probe.cpus)
    # CPU seconds spent outside the runs, per run, in the steady state: the parent's after its first result
    # (its writing and bookkeeping; in process, less the runs it ran itself) and the pool workers' (reaped
    # at shutdown: messages, pickling; a forkserver's or a Dask nanny's children are not counted)
    inline = sum(1 for c in probe.clocks if c[0] == os.getpid())
    parent = (probe.cpu_last - (probe.cpu_first or 0.0) - sum(probe.cpus[1:inline])) / max(1, n - 1)
    kids = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    worker = max(0.0, kids - sum(probe.cpus[: n] if inline == 0 else [])) / n if kids > 0 else 0.0
    return {"wall": wall, "fixed": first - t0, "tail": tail, "cpu": cpu, "run_wall": statistics.fmean(probe.walls),
            "per_run": (wall - (first - t0) - tail) * workers / n - cpu,
            "gap": sum(gaps) / n, "write": sum(b - a for a, b in probe.writes) / n, "procs": len(by_pid),
            "parent_cpu": parent, "worker_cpu": worker, "o_cpu": parent + worker}


def digest(out: Path) -> str:
    """results.csv without timing columns, and every run folder's files but timing.json."""
    h = hashlib.sha256(comparable_results(out).encode())
    for f in sorted((out / "runs").rglob("*")):
        if f.is_file() and f.name != TIMING:
            h.update(str(f.relative_to(out)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def model(meas: dict[str, dict[str, float]], n: int) -> tuple[Any, str]:
    """T(w) from the measured overheads (module docstring); returns (predict, the fitted numbers)."""
    one = meas.get("1")
    pools = {int(k): v for k, v in meas.items() if k.isdigit() and k != "1"}
    if one is None or not pools:
        return None, "model: needs 1 worker and at least one pool worker count"
    c = one["cpu"]
    o1 = one["o_cpu"]
    serial = {w: v["fixed"] + v["tail"] for w, v in pools.items()}
    ws = sorted(pools)
    if len(ws) >= 2:  # least squares of S(w) = S0 + s w
        mw = statistics.fmean(ws)
        ms = statistics.fmean(serial.values())
        f = max(0.0, sum((w - mw) * (serial[w] - ms) for w in ws) / sum((w - mw) ** 2 for w in ws))
        f0 = ms - f * mw
    else:  # one pool size: the part above the in-process sweep's grows with the workers
        f = max(0.0, (serial[ws[0]] - one["fixed"] - one["tail"]) / ws[0])
        f0 = serial[ws[0]] - f * ws[0]
    big = pools[ws[-1]]
    o = big["o_cpu"]
    wr = big["parent_cpu"]

    def predict(w: int) -> float:
        if w == 1:
            return one["fixed"] + one["tail"] + n * (c + o1)
        return max(f0 + f * w + n * (c + o) / w + c / 2, f0 + f * w + n * wr)

    text = (f"model: n = {n}, c = {c:.3f} CPU-s/run, F1 = {one['fixed'] + one['tail']:.2f} s, "
            f"o1 = {o1 * 1000:.1f} ms/run; pool F(w) = {f0:.2f} + {f:.3f} w s, o = {o * 1000:.1f} ms/run "
            f"(CPU outside runs at {ws[-1]} workers), of it the parent's {wr * 1000:.1f} ms/run")
    return predict, text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", choices=sorted(GRIDS), default="ab40")
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2); 1 is needed")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every worker count (medians; default 1)")
    ap.add_argument("--dask", type=int, default=0, metavar="N", help="also a Dask LocalCluster of N workers")
    ap.add_argument("--predict", default="2,4,8,16", help="worker counts the model predicts (default 2,4,8,16)")
    ap.add_argument("--fit", default="", help="the worker counts the model is fitted to (default: every local one "
                    "measured; e.g. 1,2 to check a 2-core prediction against a larger machine's measurement)")
    ap.add_argument("--quick", action="store_true", help="smoke-size runs (210 tasks): checks the bench runs")
    ap.add_argument("--out", help="also write the printed table to this file")
    args = ap.parse_args()
    try:
        counts = [int(x) for x in args.workers.split(",") if x.strip()]
        predict_at = [int(x) for x in args.predict.split(",") if x.strip()]
        fit = {x.strip() for x in args.fit.split(",") if x.strip()} or {str(w) for w in counts}
    except ValueError:
        sys.exit(f"bench_sweep: --workers / --predict: comma-separated integers, not {args.workers!r}")
    if 1 not in counts or any(w < 1 for w in counts):
        sys.exit("bench_sweep: --workers must include 1 (the baseline) and only counts >= 1")
    grid, seeds = GRIDS[args.grid]
    plan = plan_sweep(SWEEP, grid, seeds=seeds, smoke=args.quick)
    n = len(plan.runs)
    configs: list[tuple[str, int, str]] = [(str(w), w, "local") for w in counts]
    if args.dask:
        configs.append((f"dask{args.dask}", args.dask, "dask"))
    load0 = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k, _w, _e in configs}
    digests: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="meshsim-bench-sweep-") as tmp:
        for r in range(max(1, args.repeat)):
            for key, w, ex in configs:
                out = Path(tmp) / f"{key}-{r}"
                runs[key].append(one_sweep(plan, out, w, ex))
                d = digest(out)
                digests.setdefault(key, d)
                if digests[key] != d:
                    digests[key] = "differs between repetitions"
    load1 = os.getloadavg()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in runs.items()}
    speed = {k: statistics.median(runs["1"][i]["wall"] / v[i]["wall"] for i in range(len(v))) for k, v in runs.items()}
    lines = [f"sweep of {n} runs ({args.grid}: {len(plan.points)} points x {len(plan.seeds)} seeds, "
             f"{'smoke-size' if args.quick else 'full-size'} staggered MeshHeal runs) on {cpus} CPUs, "
             f"repeat {max(1, args.repeat)} (medians)",
             f"  {'workers':>8} {'wall s':>7} {'speed-up':>8} {'fixed s':>7} {'tail s':>6} {'run CPU':>7} "
             f"{'run wall':>8} {'per-run ms':>10} {'gap ms':>6} {'write ms':>8} {'CPU ms':>6} {'procs':>5}",
             "           (per run: per-run = wall beyond the run's CPU; gap = a worker between two runs; write = the "
             "parent writing it; CPU = CPU outside runs, parent + workers)"]
    for k, m in med.items():
        lines.append(f"  {k:>8} {m['wall']:7.2f} {speed[k]:8.2f} {m['fixed']:7.2f} {m['tail']:6.2f} "
                     f"{m['cpu']:7.3f} {m['run_wall']:8.3f} {m['per_run'] * 1000:10.0f} {m['gap'] * 1000:6.1f} "
                     f"{m['write'] * 1000:8.1f} {m['o_cpu'] * 1000:6.1f} {m['procs']:5.0f}")
    predict, text = model({k: v for k, v in med.items() if k in fit}, n)
    lines.append(f"  fitted to {', '.join(sorted(fit, key=int))} workers; " + text)
    if predict is not None:
        t1 = predict(1)
        row = []
        for w in predict_at:
            got = f" (measured {speed[str(w)]:.2f})" if str(w) in speed else ""
            row.append(f"{w}: {t1 / predict(w):.2f}{got}")
        lines.append("  predicted speed-up T(1)/T(w), T(w) = F0 + f w + n (c + o) / w + c / 2:  " + ";  ".join(row))
    lines.append(f"  load average (1/5/15 min) before {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, "
                 f"after {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f}")
    same = len(set(digests.values())) == 1 and "differs between repetitions" not in digests.values()
    lines.append(f"  results (results.csv without timing columns, run folders) identical across "
                 f"{', '.join(digests)}: {'yes' if same else 'NO'}")
    print("\n".join(lines), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
