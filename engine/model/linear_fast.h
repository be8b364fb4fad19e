// The fast Linear layer: the same contract as LinearForward/LinearBackward in
// engine/model/layers.h (which stay the plain-loop reference this is tested against), with the
// matrix products done by Eigen's blocked GEMM over maps of the caller's flat buffers (no copies,
// no allocation in the steady state). Single-threaded unless Eigen is built with OpenMP. The
// Eigen code is compiled for SSE2, AVX2 and AVX-512 and the copy this CPU runs is chosen once per
// process (linear_kernels.h; EMBODY_CPU_PATH, engine/fp8/cpu_path.h, forces one).
//
// Row-major, as everywhere in the engine: B = rows, C = input features, OC = output features.
// This header does not include Eigen, so users stay light; only linear_fast.cc does.
#pragma once

namespace engine::fp8 {
struct Fp8Matrix;
}

namespace engine {

// The copy of the kernels this process runs: "sse2", "avx2" or "avx512".
const char* LinearKernelsName();

// out (B, OC) = inp (B, C) · weight (OC, C)ᵀ + bias (OC) (bias may be nullptr).
void LinearForwardFast(float* out, const float* inp, const float* weight, const float* bias, int B,
                       int C, int OC);

// The same product with the weight as FP8 codes and 128 x 128 block scales when weight8 is not
// null (engine/fp8/fp8_matmul.h, weight-only: the inference path of a quantised policy); with
// weight8 null, LinearForwardFast on `weight`. weight8 must be (OC, C).
void LinearForwardMaybeFp8(float* out, const float* inp, const float* weight,
                           const fp8::Fp8Matrix* weight8, const float* bias, int B, int C, int OC);

// Accumulates: dinp (B, C) += dout · weight (dinp may be nullptr), dweight (OC, C) += doutᵀ · inp,
// dbias (OC) += column sums of dout (dbias may be nullptr). With overwrite_dinp, dinp = dout ·
// weight instead: saves zeroing a scratch gradient that has no other contributor.
void LinearBackwardFast(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, int B, int C, int OC,
                        bool overwrite_dinp = false);

// GELU (tanh approximation, as GeluForward/GeluBackward in layers.h) with Eigen's vectorised
// tanh: out (N) = gelu(inp); dinp (N) += gelu'(inp) · dout.
void GeluForwardFast(float* out, const float* inp, long N);
void GeluBackwardFast(float* dinp, const float* inp, const float* dout, long N);
// grad (N) *= gelu'(inp): the backward in place, for a gradient no one else accumulates into.
void GeluGradInPlace(float* grad, const float* inp, long N);

}  // namespace engine

namespace engine {

// This thread's float32 GEMM rate through the same Eigen path, in GFLOP/s: the best of repeated
// (4096 × 256) · (256 × 1024) products (the reference policy's MLP-up shape) over about `seconds`.
// The trainer's honest denominator for model FLOP utilisation: measured, not a datasheet peak.
double MeasureGemmGflops(double seconds = 0.25);

}  // namespace engine
