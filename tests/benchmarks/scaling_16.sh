#!/usr/bin/env bash
# Sweep throughput on a 16-core machine (issue 33, docs/scaling.md "Many runs"): the bench's 128-run grid
# (staggered128: six-agent staggered MeshHeal, alpha in {1.0, 1.2, 1.4, 1.6} at beta = 3.0, seeds 1-32)
# at 1, 2, 4, 8 and 16 workers, and on a Dask LocalCluster of 16 workers when Dask distributed is
# importable; then the model's prediction fitted to 1 and 2 workers only (what a 2-core machine can
# measure) beside the measurement. About 2.5 minutes at 0.47 CPU-s a run; cut off at 290 s per step
# so the whole stays within 5 minutes. The table goes to $OUT/scaling.txt (default ./scaling-out).
#
# Run from the checkout's root, installed or not (the dependencies importable):
#     PYTHONPATH=. bash tests/benchmarks/scaling_16.sh
#     OUT=/tmp/s PYTHON=.venv/bin/python bash tests/benchmarks/scaling_16.sh
# BENCH_ARGS adds options to the bench (BENCH_ARGS=--quick: smoke-size runs, to check the script itself).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
OUT="${OUT:-./scaling-out}"
mkdir -p "$OUT"
TABLE="$OUT/scaling.txt"
# absolute, so that Dask's worker processes (started elsewhere) import this checkout too
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
    echo "== $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(nproc) CPUs ($(uname -sr))"
    grep -m1 'model name' /proc/cpuinfo 2>/dev/null || true
    uptime
} | tee -a "$TABLE"
DASK=()
if "$PY" -c 'import distributed' 2>/dev/null; then DASK=(--dask 16); else echo "(no Dask distributed: LocalCluster skipped)" | tee -a "$TABLE"; fi
# one pass of every worker count (the 1-worker baseline alone is ~60 s); the model fitted to 1 and 2
timeout 290 "$PY" tests/benchmarks/bench_sweep.py --grid staggered128 --workers 1,2,4,8,16 "${DASK[@]}" \
    --fit 1,2 --predict 2,4,8,16 --out "$TABLE" ${BENCH_ARGS:-}
echo "table: $TABLE"
