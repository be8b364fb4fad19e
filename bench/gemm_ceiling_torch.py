#!/usr/bin/python3
"""PyTorch side of gemm_ceiling: the same float32 GEMMs (bench/gemm_shapes.h) through torch.mm
(Debian python3-torch → OpenBLAS), with 1 and 2 threads. Prints a table and one JSON line:
{"torch_t1": {case: GFLOP/s}, "torch_t2": {...}, "openblas": {...}}.

Run with /usr/bin/python3 (pyenv's python3 has no torch). OpenBLAS reads OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE at load time; gemm_ceiling unsets them for this command only. The kernel OpenBLAS
picked is reported from openblas_get_corename().
"""
import argparse
import ctypes
import json
import os
import time

import torch

LAYERS = [("qkv", 256, 768), ("mlp_up", 256, 1024), ("mlp_down", 1024, 256)]
FORMS = ["fwd", "bwd_in", "bwd_w"]


def openblas_info():
    """Which BLAS library this process loaded, and the kernel (core type) OpenBLAS chose."""
    info = {"env_OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "env_OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f
                       if "blas" in line.split()[-1] or "lapack" in line.split()[-1]})
    info["loaded"] = libs
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            info["corename"] = lib.openblas_get_corename().decode()
            info["config"] = lib.openblas_get_config().decode()
            info["library"] = os.path.realpath(path)
            break
        except (OSError, AttributeError):
            continue
    return info


def seconds_per_call(fn, min_seconds, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        calls = 0
        t0 = time.perf_counter()
        while True:
            fn()
            calls += 1
            s = time.perf_counter() - t0
            if s >= min_seconds:
                break
        best = min(best, s / calls)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--min-seconds", type=float, default=0.25)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    torch.manual_seed(0)
    B = args.tokens
    result = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        col = {}
        for name, C, OC in LAYERS:
            x, w, dy = torch.randn(B, C), torch.randn(OC, C), torch.randn(B, OC)
            for form in FORMS:
                if form == "fwd":
                    out = torch.empty(B, OC)
                    fn = lambda: torch.mm(x, w.t(), out=out)
                elif form == "bwd_in":
                    out = torch.empty(B, C)
                    fn = lambda: torch.mm(dy, w, out=out)
                else:
                    out = torch.empty(OC, C)
                    fn = lambda: torch.mm(dy.t(), x, out=out)
                s = seconds_per_call(fn, args.min_seconds, args.reps)
                col[f"{name}.{form}"] = 2.0 * B * C * OC / s * 1e-9
        result[f"torch_t{threads}"] = col
        print(f"torch threads={threads}: " +
              " ".join(f"{k}={v:.1f}" for k, v in col.items()), flush=True)
    result["openblas"] = openblas_info()
    result["torch"] = torch.__version__
    print(json.dumps(result))


if __name__ == "__main__":
    main()
