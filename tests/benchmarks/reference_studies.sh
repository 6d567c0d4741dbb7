#!/usr/bin/env bash
# The reference uncertainty studies of `meshsim reproduce` (meshsim.paper.reproduce.bands.STUDIES;
# docs/validation.md "Assumption bands"): run any subset into a folder, then ship their small tables with
# the package (meshsim/data/studies/uncertainty-<name>/: uncertainty.json, samples.csv, ranking.csv,
# bands.csv; no run folders), where `reproduce` finds them when ./runs/uncertainty-<name> is absent.
#
#   tests/benchmarks/reference_studies.sh run OUT [--workers N] [--serial] [STUDY ...]
#   tests/benchmarks/reference_studies.sh ship OUT [STUDY ...]      # OUT/uncertainty-<name> -> meshsim/data/studies/
#   tests/benchmarks/reference_studies.sh list
#
# STUDY (default: all eight), the study's budget, and its cost (CPU-minutes measured on the 2-core
# reference machine; at 16 workers alone, wall; all selected studies run at once unless --serial, each
# with --workers N, sharing the cores):
#   meshheal-persistent-math  3,000 runs (600 x 5 seeds), 6 agents    ~40 CPU-min  ~3 min at 16 workers
#   meshheal-scale-96-sparse    300 runs (150 x 2 seeds), 96 agents   ~40 CPU-min  ~3 min at 16 workers
#   ablation-b2w1-cpwbft      3,000 runs (600 x 5 seeds)              ~34 CPU-min  ~2.5 min at 16 workers
#   sac-merg-7-math-l4        1,200 runs (400 x 3 seeds)              ~45 CPU-min  ~3.5 min at 16 workers
#   aime-sac-7, hmmt-cpwbft-7, aime-cpwbft-7, hmmt-sac-7 (SAC Tab. 5 / Tab. 6; these four ship already)
#                               110 runs (110 x 1 seed) each           ~1 CPU-min each
# The four older ones together are about 160 CPU-min: about 10-11 min on 16 cores at once, so within an
# 8-minute slot run two at a time (e.g. `run OUT --workers 16 meshheal-persistent-math ablation-b2w1-cpwbft`,
# then the other two); a study resumes where it stopped when rerun into the same OUT (finished runs reused).
# On a lent machine whose results come back through a small folder ($OUT): run there, then
#   REFERENCE_STUDIES_SHIP_TO=$OUT tests/benchmarks/reference_studies.sh ship /tmp/st STUDY ...
# leaves only the four tables per study in $OUT (about 80 KiB each); back here,
#   tests/benchmarks/reference_studies.sh ship FETCHED_OUT STUDY ...   puts them in the package; commit them.
# Same scenario, seeds, budget and design seed => byte-identical ranking.csv, bands.csv and samples.csv,
# whatever --workers is.
set -euo pipefail

start=$PWD
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"  # the scenarios' paths are relative to the checkout
meshsim=${MESHSIM:-meshsim}
command -v "$meshsim" >/dev/null 2>&1 || meshsim="$here/.venv/bin/meshsim"
ship_to=${REFERENCE_STUDIES_SHIP_TO:-"$here/meshsim/data/studies"}  # the tests ship elsewhere
case "$ship_to" in /*) ;; *) ship_to="$start/$ship_to" ;; esac
ALL=(meshheal-persistent-math meshheal-scale-96-sparse ablation-b2w1-cpwbft sac-merg-7-math-l4
     aime-sac-7 hmmt-cpwbft-7 aime-cpwbft-7 hmmt-sac-7)
FILES=(uncertainty.json samples.csv ranking.csv bands.csv)

args_of() {  # the documented command of each study (docs/validation.md), without -o and --workers
  case "$1" in
    meshheal-persistent-math) echo "scenarios/meshheal/persistent-math.yaml --metric detection.false_isolations \
      --metric accuracy.by_phase.degraded --metric detection.delay_mean --paper accuracy.by_phase.degraded=0.802" ;;
    meshheal-scale-96-sparse) echo "scenarios/meshheal/scale-96-sparse.yaml --seeds count:2 --budget 300 \
      --metric detection.false_isolations --metric accuracy.overall --metric detection.delay_mean \
      --paper accuracy.overall=0.81" ;;
    ablation-b2w1-cpwbft) echo "scenarios/sac/ablation-b2w1-cpwbft.yaml --metric bfti --paper bfti=-0.167" ;;
    sac-merg-7-math-l4) echo "scenarios/sac/sac-merg-7.yaml --set protocol.params.dataset=math_l4 \
      --set tasks.count=100 --seeds count:3 --budget 1200 --metric bfti --paper bfti=0.03" ;;
    aime-sac-7) echo "scenarios/sac/aime-sac-7.yaml --metric bfti --metric h_majority --paper bfti=-0.01 --seeds 1 --budget 110" ;;
    hmmt-cpwbft-7) echo "scenarios/sac/hmmt-cpwbft-7.yaml --metric bfti --metric h_majority --paper bfti=-0.514 --seeds 1 --budget 110" ;;
    aime-cpwbft-7) echo "scenarios/sac/aime-cpwbft-7.yaml --metric bfti --metric h_majority --paper bfti=-0.395 --seeds 1 --budget 110" ;;
    hmmt-sac-7) echo "scenarios/sac/hmmt-sac-7.yaml --metric bfti --metric h_majority --paper bfti=-0.038 --seeds 1 --budget 110" ;;
    *) echo "error: STUDY: unknown study '$1'; choose from ${ALL[*]}" >&2; exit 2 ;;
  esac
}

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ $# -ge 1 ] || usage
mode=$1; shift
case "$mode" in
  list) for s in "${ALL[@]}"; do echo "$s: meshsim uncertainty $(args_of "$s" | tr -s ' ')"; done; exit 0 ;;
  run|ship) ;;
  *) usage ;;
esac
[ $# -ge 1 ] || usage
out=$1; shift
case "$out" in /*) ;; *) out="$start/$out" ;; esac  # relative to where it was called from
workers=$(nproc); serial=0; picked=()
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "error: --workers: not a positive integer: '${2:-}'" >&2; exit 2; }
               workers=$2; shift 2 ;;
    --serial) serial=1; shift ;;
    -*) echo "error: unknown option '$1'" >&2; exit 2 ;;
    *) args_of "$1" >/dev/null; picked+=("$1"); shift ;;
  esac
done
[ ${#picked[@]} -gt 0 ] || picked=("${ALL[@]}")

if [ "$mode" = run ]; then
  mkdir -p "$out"
  pids=(); names=()
  for s in "${picked[@]}"; do
    # shellcheck disable=SC2046  # the study's arguments split on purpose
    cmd=("$meshsim" uncertainty $(args_of "$s") --workers "$workers" -q -o "$out/uncertainty-$s")
    echo "== $s: ${cmd[*]}" >&2
    if [ "$serial" = 1 ]; then
      ( time "${cmd[@]}" ) >"$out/$s.log" 2>&1 || { echo "error: $s failed (exit $?); see $out/$s.log" >&2; exit 1; }
    else
      ( time "${cmd[@]}" ) >"$out/$s.log" 2>&1 & pids+=($!); names+=("$s")
    fi
  done
  bad=0
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "error: ${names[$i]} failed; see $out/${names[$i]}.log" >&2; bad=1; }
  done
  for s in "${picked[@]}"; do echo "$s: $(grep -E '^real' "$out/$s.log" | tail -1)" >&2; done
  exit $bad
fi

# ship: only finished studies (their samples.csv is written last), only the small tables
for s in "${picked[@]}"; do
  src="$out/uncertainty-$s"
  for f in "${FILES[@]}"; do
    [ -f "$src/$f" ] || { echo "error: $src: not a finished uncertainty study (no $f); run it first" >&2; exit 2; }
  done
done
mkdir -p "$ship_to"
for s in "${picked[@]}"; do
  src="$out/uncertainty-$s"; dst="$ship_to/uncertainty-$s"
  tmp=$(mktemp -d "$ship_to/.ship-XXXXXX")
  for f in "${FILES[@]}"; do cp "$src/$f" "$tmp/$f"; done
  rm -rf "$dst"; mv "$tmp" "$dst"
  echo "shipped $dst ($(du -sk "$dst" | cut -f1) KiB)"
done
