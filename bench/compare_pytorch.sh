#!/bin/bash
# compare_pytorch.sh: Embody's trainer vs PyTorch on the same model and the same packed data,
# measured in ONE run, with this machine's GEMM ceiling measured in the same run.
#
#   bench/compare_pytorch.sh [BUILD_DIR=build] [STEPS=6] [WARMUP=2] [ROWS=8]
#
# Fairness rule (2 cores): ours runs as 2 MPI ranks of one thread each (mpirun -np 2), PyTorch as
# one process with 2 threads (torch.set_num_threads(2)); both train on the same global batch per
# optimizer step: the same samples of the same stream (seed 1), in the same rows (each rank's
# slice packed best-fit decreasing into rows of 512; dump_packed_plan --world 2 lists both ranks'
# rows for the one PyTorch process). Both run forward + backward + AdamW of the reference model
# (d_model 256, 4 layers, 8 heads, MLP 1024, horizon 16 x 7, float32), timed after warm-up, and
# report median REAL tokens/s. PyTorch runs in both packed forms (block-diagonal mask per row;
# attention per sample); ours is compared with the faster. PyTorch is Debian's python3-torch
# (/usr/bin/python3, not the pyenv python3 first on PATH) with OpenBLAS; OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE are unset for its commands only, and the kernel OpenBLAS picked is reported.
#
# GEMM ceiling of the machine for 2 cores = the best of Eigen and OpenBLAS (gemm_ceiling's mix of
# the model's nine GEMM shapes at 4096 tokens): max(2 x one thread, two threads) per library.
# Ours' useful GFLOP/s = the model FLOPs of its real tokens (engine/batches/train_batches.h,
# StepFlops) per second; its share of that ceiling is printed. Last line: JSON.
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-6}
WARMUP=${3:-2}
ROWS=${4:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/bin
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

load() { cut -d' ' -f1 /proc/loadavg; }
echo "compare_pytorch: $(nproc) cores, load average $(load) at start"

echo "== GEMM ceiling (Eigen 1/2 threads, PyTorch/OpenBLAS 1/2 threads)"
"$BIN/gemm_ceiling" --tokens 4096 | tee "$WORK/gemm.txt" | grep -E 'mix|ratio|torch BLAS'
tail -n 1 "$WORK/gemm.txt" > "$WORK/gemm.json"

echo "== Embody: mpirun -np 2 train_throughput --mode packed (rows $ROWS of 512 per rank)"
mpirun -np 2 --oversubscribe "$BIN/train_throughput" --mode packed --rows "$ROWS" \
  --steps "$STEPS" --warmup "$WARMUP" --seed 1 2>/dev/null | tee "$WORK/ours.txt" | grep -v '^{'
tail -n 1 "$WORK/ours.txt" > "$WORK/ours.json"

SAMPLES=$(/usr/bin/python3 -c "import json;print(json.load(open('$WORK/ours.json'))['packed']['samples_per_rank'])")
echo "== PyTorch: same plan ($SAMPLES samples per rank x 2 ranks per step), 2 threads"
"$BIN/dump_packed_plan" --steps $((STEPS + WARMUP)) --samples-per-step $((2 * SAMPLES)) \
  --tokens-per-row 512 --action-tokens 16 --seed 1 --world 2 --out "$WORK/plan.json"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$HERE/torch_policy.py" \
  --plan "$WORK/plan.json" --threads 2 --warmup "$WARMUP" --steps "$STEPS" | tee "$WORK/torch.txt" |
  grep -v '^{'
tail -n 1 "$WORK/torch.txt" > "$WORK/torch.json"

/usr/bin/python3 - "$WORK" "$(load)" <<'EOF'
import json, sys
work, load_end = sys.argv[1], float(sys.argv[2])
gemm = json.load(open(f"{work}/gemm.json"))
ours = json.load(open(f"{work}/ours.json"))
torch = json.load(open(f"{work}/torch.json"))
mix = gemm["mix_gflops"]
ceiling_parts = {
    "eigen": max(2 * mix.get("eigen_t1", 0), mix.get("eigen_t2", 0)),
    "openblas": max(2 * mix.get("torch_t1", 0), mix.get("torch_t2", 0)),
}
ceiling = max(ceiling_parts.values())
forms = {k: v["median_tokens_per_s"] for k, v in torch["forms"].items()}
best_form = max(forms, key=forms.get)
ours_tps = ours["packed"]["real_tokens_per_s"]
useful = ours["packed"]["useful_gflops"]
ratio = ours_tps / forms[best_form]
print(f"ours (2 ranks x 1 thread): {ours_tps:.0f} real tokens/s, "
      f"{ours['packed']['step_seconds'] * 1e3:.0f} ms/step, useful {useful:.1f} GFLOP/s")
for k, v in forms.items():
    print(f"pytorch {k} (2 threads): {v:.0f} real tokens/s")
print(f"ours / pytorch {best_form} (the faster form): {ratio:.2f}x  (target >= 1.0x, goal 1.25x)")
print(f"GEMM ceiling for 2 cores: {ceiling:.1f} GFLOP/s (eigen {ceiling_parts['eigen']:.1f}, "
      f"openblas {ceiling_parts['openblas']:.1f}); ours reaches {100 * useful / ceiling:.0f}% "
      f"of it in useful FLOPs (goal >= 80%)")
print(f"OpenBLAS kernel: {torch.get('blas')}; load average at end {load_end:.2f}")
print(json.dumps({
    "bench": "compare_pytorch", "fairness": "2 MPI ranks x 1 thread vs 1 process x 2 threads, "
    "same global batch and rows per step",
    "ours_real_tokens_per_s": ours_tps, "torch_real_tokens_per_s": forms,
    "torch_best_form": best_form, "ratio_ours_over_torch_best": ratio,
    "useful_gflops": useful, "gemm_ceiling_gflops": ceiling, "ceiling_parts": ceiling_parts,
    "share_of_ceiling": useful / ceiling, "ours_mfu_vs_own_measure": ours["packed"]["mfu"],
    "torch_blas": torch.get("blas"), "loadavg_start_ours": ours["loadavg_start"],
    "loadavg_end": load_end, "steps": ours["steps"], "samples_per_rank":
    ours["packed"]["samples_per_rank"]}))
EOF
