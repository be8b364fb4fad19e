#!/bin/bash
# rank_scaling.sh: data-parallel scaling of the trainer from 1 to 2 ranks, weak scaling (the same
# per-rank batch: --rows packed rows of 512 per rank), reference model, in one run.
#   bench/rank_scaling.sh [BUILD_DIR=build] [STEPS=6] [WARMUP=2] [ROWS=8]
# Efficiency = real tokens/s on 2 ranks / (2 × real tokens/s on 1 rank). Last line: JSON.
set -euo pipefail
BUILD=${1:-build}; STEPS=${2:-6}; WARMUP=${3:-2}; ROWS=${4:-8}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in 1 2; do
  mpirun -np "$np" --oversubscribe "$BUILD/bin/train_throughput" --mode packed --rows "$ROWS" \
    --steps "$STEPS" --warmup "$WARMUP" 2>/dev/null | tee "$WORK/$np.txt" | grep -v '^{'
  tail -n 1 "$WORK/$np.txt" > "$WORK/$np.json"
done
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
a, b = (json.load(open(f"{w}/{n}.json")) for n in (1, 2))
t1, t2 = a["packed"]["real_tokens_per_s"], b["packed"]["real_tokens_per_s"]
eff = t2 / (2 * t1)
print(f"1 rank {t1:.0f} real tokens/s, 2 ranks {t2:.0f}: weak scaling efficiency {eff:.2f} "
      f"(allreduce wait {1e3 * b['packed']['allreduce_wait_seconds']:.1f} ms/step on 2 ranks)")
print(json.dumps({"bench": "rank_scaling", "scaling": "weak (same per-rank batch)",
                  "real_tokens_per_s_1": t1, "real_tokens_per_s_2": t2,
                  "weak_scaling_efficiency": eff,
                  "allreduce_wait_seconds_2": b["packed"]["allreduce_wait_seconds"],
                  "loadavg": [a["loadavg_start"], b["loadavg_start"], b["loadavg_end"]]}))
PY
