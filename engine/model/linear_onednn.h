// The Linear layer's matrix products through oneDNN's matmul (Debian's libdnnl, which picks its
// kernels from the CPU's flags at run time: one binary, no -march), in float32 or with bfloat16
// operands and float32 accumulation and output. The same contract as LinearForwardFast /
// LinearBackwardFast (linear_fast.h), which choose between this and the Eigen kernels
// (SetLinearCompute); internal to engine/model.
//
// Every product runs on the calling thread only: oneDNN's OpenMP runtime is held to one thread
// per calling thread, as the engine runs one single-threaded rank per core.
//
// bf16: the operands are rounded to bfloat16 (round to nearest even, by oneDNN's reorder) into
// per-thread scratch buffers, the product accumulates in float32, and the result (and the
// accumulated gradients) stay float32. Bias, GELU, norms and everything outside these products
// stay float32.
#pragma once

namespace engine::linear {

enum class OnednnType { kF32, kBf16 };

// Whether oneDNN runs bfloat16 products natively on this CPU (AVX512_BF16 or AMX), from its own
// run-time ISA detection. Without it oneDNN would emulate bf16 on AVX-512 (slower than fp32) or
// refuse it on AVX2.
bool OnednnHasNativeBf16();

// out (B, OC) = inp (B, C) · weight (OC, C)ᵀ + bias (OC) (bias may be nullptr).
void OnednnForward(OnednnType type, float* out, const float* inp, const float* weight,
                   const float* bias, int B, int C, int OC);

// dinp (B, C) += dout · weight (or = with overwrite_dinp; dinp may be nullptr), dweight (OC, C) +=
// doutᵀ · inp, dbias (OC) += column sums of dout (float32 always; may be nullptr).
void OnednnBackward(OnednnType type, float* dinp, float* dweight, float* dbias, const float* dout,
                    const float* inp, const float* weight, int B, int C, int OC,
                    bool overwrite_dinp);

// Seconds of the fastest of `reps` products y (m, n) = x (m, k) · w (n, k)ᵀ on random data.
double OnednnTimeGemm(OnednnType type, int m, int n, int k, int reps);

}  // namespace engine::linear
