#!/bin/bash
# planner_calibrate.sh: calibrates the planner's CPU terms on this machine and reports its
# prediction error against measured training runs, in one run (docs/planner.md, "Calibration").
#   bench/planner_calibrate.sh [BUILD_DIR=build] [STEPS=6] [WARMUP=2]
# 1. fit:    train_throughput, 1 rank, reference shape (d_model 256, 4 layers, mlp 1024, 8 rows)
# 2. probe:  allreduce_probe on 2 ranks (alpha, beta of the shared-memory all-reduce)
# 3. checks: the reference shape again on 1 and 2 ranks, and a second shape (d_model 384,
#            3 layers, mlp 1536, 4 rows) on 1 and 2 ranks, each predicted from 1 and 2 alone.
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
ALT=(--d_model 384 --layers 3 --heads 6 --mlp 1536 --rows 4)
lscpu | grep 'Model name' || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
train fit 1 "${REF[@]}"
mpirun -np 2 --oversubscribe "$BUILD/bin/allreduce_probe" 2>/dev/null | tee "$WORK/probe.txt" \
  | grep -v '^{'
tail -n 1 "$WORK/probe.txt" > "$WORK/probe.json"
train ref1 1 "${REF[@]}"
train ref2 2 "${REF[@]}"
train alt1 1 "${ALT[@]}"
train alt2 2 "${ALT[@]}"
"$BUILD/bin/planner_calibrate" "$WORK/fit.json" "$WORK/probe.json" "$WORK/ref1.json" \
  "$WORK/ref2.json" "$WORK/alt1.json" "$WORK/alt2.json"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
