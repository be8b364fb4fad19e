// FP8 matrix products in the layout of the engine's Linear layers (engine/model/linear_fast.h):
// Y (M, N) = X (M, K) · W (N, K)ᵀ + bias, W row-major (out features, in features), so both
// operands run along K in memory and K-blocks of 128 line up with both operands' scales.
//
//   MatmulWeightFp8  fp32 X × fp8 W (weight-only): policy inference at batch 1..8, where reading
//                    the weights is the cost and fp8 reads a quarter of the bytes. Two products:
//                    kFp32 decodes W's 16-wide vectors to fp32 and scales them in registers,
//                    reused across up to 4 rows of X (2 on AVX2); kBf16Dot (E4M3 and E5M2,
//                    CPUs with AVX512_BF16) reads the codes as bf16 with shifts and a mask and
//                    multiplies with VDPBF16PS against X rounded to bf16 (WeightOnlyKernel).
//   MatmulFp8        fp8 X (1 × 128 tiles) × fp8 W (128 × 128 blocks), fp32 accumulation: the
//                    training-sized product. Each K-block of both operands is decoded once
//                    into L1-sized fp32 panels and multiplied by a register-tiled kernel.
//
// Both accumulate in fp32 and agree with an fp32 product of the dequantised operands up to
// summation order (kBf16Dot: within the bound below). NaN codes propagate as NaN; E5M2
// infinities as infinities. The CPU path is the process's (engine/cpu/cpu_path.h) unless one is
// passed.
#pragma once

#include "common/status.h"
#include "engine/fp8/block_quant.h"
#include "engine/cpu/cpu_path.h"

namespace engine::fp8 {

// Which product MatmulWeightFp8 runs.
//   kFp32     x stays fp32: the dequantised product up to summation order, on every path and
//             format.
//   kBf16Dot  each x element times its K-block's weight scale is rounded to bf16 (relative error
//             ≤ 2^-8) and subnormal codes count as zero (each is ≤ 2^-6 · 7/8 of its block's
//             scale in E4M3, ≤ 2^-14 · 3/4 in E5M2), so |y - y_dequantised| ≤ Σ_k (2^-8 |x_k w_k|
//             + |x_k| · [w_k subnormal] · |w_k|) plus fp32 summation order. On the avx512 path
//             of a CPU with AVX512_BF16 only (Bf16DotRuns), FailedPrecondition elsewhere. A
//             matrix with NaN codes (or E5M2 infinities) runs kFp32, which keeps them exact.
//   kFastest  kBf16Dot where it runs, else kFp32: what policy inference uses.
enum class WeightOnlyKernel { kFastest, kFp32, kBf16Dot };

// Whether kBf16Dot runs for weights of `format` on `path` on this CPU.
bool Bf16DotRuns(Format format, cpu::CpuPath path = cpu::ActiveCpuPath());

// y (M, N) = x (M, K) · dequant(w) (N, K)ᵀ + bias (N; may be null). K = w.cols, N = w.rows.
common::Status MatmulWeightFp8(float* y, const float* x, int M, const Fp8Matrix& w,
                               const float* bias, cpu::CpuPath path = cpu::ActiveCpuPath(),
                               WeightOnlyKernel kernel = WeightOnlyKernel::kFastest);

// y (M, N) = dequant(x) (M, K) · dequant(w) (N, K)ᵀ + bias (may be null); x.cols == w.cols.
common::Status MatmulFp8(float* y, const Fp8Matrix& x, const Fp8Matrix& w, const float* bias,
                         cpu::CpuPath path = cpu::ActiveCpuPath());

}  // namespace engine::fp8
