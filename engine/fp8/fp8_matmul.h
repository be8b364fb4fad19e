// FP8 matrix products in the layout of the engine's Linear layers (engine/model/linear_fast.h):
// Y (M, N) = X (M, K) · W (N, K)ᵀ + bias, W row-major (out features, in features), so both
// operands run along K in memory and K-blocks of 128 line up with both operands' scales.
//
//   MatmulWeightFp8  fp32 X × fp8 W (weight-only): policy inference at batch 1..8, where reading
//                    the weights is the cost and fp8 reads a quarter of the bytes. W's 16-wide
//                    vectors are decoded and scaled in registers and reused across up to 4 rows
//                    of X (2 on AVX2).
//   MatmulFp8        fp8 X (1 × 128 tiles) × fp8 W (128 × 128 blocks), fp32 accumulation: the
//                    training-sized product. Each K-block of both operands is decoded once
//                    into L1-sized fp32 panels and multiplied by a register-tiled kernel.
//
// Both accumulate in fp32 and agree with an fp32 product of the dequantised operands up to
// summation order. NaN codes propagate as NaN; E5M2 infinities as infinities. The CPU path is
// the process's (cpu_path.h) unless one is passed.
#pragma once

#include "common/status.h"
#include "engine/fp8/block_quant.h"
#include "engine/fp8/cpu_path.h"

namespace engine::fp8 {

// y (M, N) = x (M, K) · dequant(w) (N, K)ᵀ + bias (N; may be null). K = w.cols, N = w.rows.
common::Status MatmulWeightFp8(float* y, const float* x, int M, const Fp8Matrix& w,
                               const float* bias, CpuPath path = ActiveCpuPath());

// y (M, N) = dequant(x) (M, K) · dequant(w) (N, K)ᵀ + bias (may be null); x.cols == w.cols.
common::Status MatmulFp8(float* y, const Fp8Matrix& x, const Fp8Matrix& w, const float* bias,
                         CpuPath path = ActiveCpuPath());

}  // namespace engine::fp8
