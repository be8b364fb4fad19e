#!/usr/bin/env bash
# Post-training FP8 quantisation of the reference policy (d_model 256, 4 layers, 8 heads,
# mlp 1024), measured side by side in one run: trains it briefly with embody-engine on the
# built-in task, then `embody-engine quantize` three times on the same checkpoint (the blocks'
# Linears only, the default; + the action head; + the input embeddings' Linears too), each
# comparing fp32 and fp8 on the same held-out batch. Prints the engine's lines and one JSON line
# per choice. docs/benchmarks.md, "FP8 post-training quantisation".
#
#   bench/ptq_bench.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build=${1:-build}
steps=${2:-150}
engine=$(realpath "$build/bin/embody-engine")
# A singleton MPI process; Open MPI refuses root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/job.json" <<JSON
{"name": "ptq-reference", "kind": "train",
 "resources": {"nodes": 1, "ranks_per_node": 1, "slot_type": "cpu"},
 "engine": {"model": {"d_model": 256, "layers": 4, "heads": 8, "mlp": 1024,
                      "action_horizon": 16, "action_dim": 7},
            "data": {"dataset": "sim:reach", "tokens_per_row": 512, "rows_per_step": 2},
            "optim": {"lr": 0.001, "steps": $steps, "warmup_steps": 10}, "seed": 0}}
JSON
echo "cpu: $(lscpu | grep 'Model name' | sed 's/.*: *//'), cpu path ${EMBODY_CPU_PATH:-auto}"
(cd "$work" && EMBODY_CHECKPOINT_DIR="$work/ckpt" "$engine" --spec job.json | tail -3)
ckpt="$work/ckpt/step-$steps.ckpt"
for flags in "" "--action-head" "--action-head --embeddings"; do
  echo "== quantize ${flags:-(blocks only)}"
  # shellcheck disable=SC2086
  "$engine" quantize --in "$ckpt" --out "$work/policy.fp8" --eval-samples 128 $flags
done
