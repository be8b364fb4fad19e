#!/bin/bash
# planner_calibrate.sh: calibrates the planner's CPU terms on this machine and reports its
# prediction error against measured training runs, in one run (docs/planner.md, "Calibration").
#   bench/planner_calibrate.sh [BUILD_DIR=build] [STEPS=6] [WARMUP=2]
# 1. fit:    train_throughput, 1 rank, at the reference shape (d_model 256, 4 layers, mlp 1024,
#            8 rows) and the quickstart demo's (d_model 96, 2 layers, mlp 384, 2 rows): the
#            compute rate and how it falls with the width (half_rate_width)
# 2. probe:  allreduce_probe on 2 ranks (alpha, beta of the shared-memory all-reduce)
# 3. checks: the two fitted shapes again and two shapes held out of the fit (d_model 384,
#            3 layers, mlp 1536, 4 rows; d_model 128, 3 layers, mlp 512, 4 rows), each on 1 and
#            2 ranks, predicted from 1 and 2 alone.
# Last line: JSON.
set -euo pipefail
BUILD=${1:-build}; STEPS=${2:-6}; WARMUP=${3:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train() {  # NAME NP ARGS...
  local name=$1 np=$2; shift 2
  mpirun -np "$np" --oversubscribe "$BUILD/bin/train_throughput" --mode packed \
    --steps "$STEPS" --warmup "$WARMUP" "$@" 2>/dev/null | tail -n 1 > "$WORK/$name.json"
}
REF=(--d_model 256 --layers 4 --heads 8 --mlp 1024 --rows 8)
DEMO=(--d_model 96 --layers 2 --heads 4 --mlp 384 --rows 2)
ALT=(--d_model 384 --layers 3 --heads 6 --mlp 1536 --rows 4)
MID=(--d_model 128 --layers 3 --heads 4 --mlp 512 --rows 4)
lscpu | grep 'Model name' || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
train fit 1 "${REF[@]}"
train fit_demo 1 "${DEMO[@]}"
mpirun -np 2 --oversubscribe "$BUILD/bin/allreduce_probe" 2>/dev/null | tee "$WORK/probe.txt" \
  | grep -v '^{'
tail -n 1 "$WORK/probe.txt" > "$WORK/probe.json"
train ref1 1 "${REF[@]}"
train ref2 2 "${REF[@]}"
train alt1 1 "${ALT[@]}"
train alt2 2 "${ALT[@]}"
train demo1 1 "${DEMO[@]}"
train demo2 2 "${DEMO[@]}"
train mid1 1 "${MID[@]}"
train mid2 2 "${MID[@]}"
"$BUILD/bin/planner_calibrate" "$WORK/fit.json,$WORK/fit_demo.json" "$WORK/probe.json" \
  "$WORK"/{ref1,ref2,alt1,alt2,demo1,demo2,mid1,mid2}.json
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
