// The fast Linear layer: the same contract as LinearForward/LinearBackward in
// engine/model/layers.h (which stay the plain-loop reference this is tested against), with the
// matrix products done by Eigen's blocked GEMM over maps of the caller's flat buffers (no copies,
// no allocation in the steady state). Single-threaded unless Eigen is built with OpenMP. The
// Eigen code is compiled for SSE2, AVX2 and AVX-512 and the copy this CPU runs is chosen once per
// process (linear_kernels.h; EMBODY_CPU_PATH, engine/cpu/cpu_path.h, forces one). The products
// can instead run through oneDNN's matmul (linear_onednn.h), in float32 or with bfloat16 operands
// and float32 accumulation: SetLinearCompute chooses, process-wide; GELU is Eigen's either way.
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

// What computes the Linear layers' matrix products. kEigenFp32 is the reference every other
// choice is tested against; kOnednnBf16 rounds each product's operands to bfloat16 and
// accumulates in float32 (weights, gradients, optimiser state and every other op stay float32).
enum class LinearCompute { kEigenFp32, kOnednnFp32, kOnednnBf16 };
const char* LinearComputeName(LinearCompute c);  // "eigen-fp32", "onednn-fp32", "onednn-bf16"

// The process's choice: set before any step runs (not synchronised with products in flight).
// Until set: DefaultFp32Compute().
void SetLinearCompute(LinearCompute c);
LinearCompute ActiveLinearCompute();

// The float32 choice, read from the environment on each call: EMBODY_GEMM=eigen|onednn forces it
// (unknown values: the default, with a warning on stderr); else oneDNN where the CPU path is
// avx512 (it measured faster there on every reference shape: docs/benchmarks.md, "GEMM
// backends"), the path's Eigen copy below it.
LinearCompute DefaultFp32Compute();

// Whether kOnednnBf16 runs natively here (AVX512_BF16 or AMX, by oneDNN's run-time detection).
// Where it does not, oneDNN would emulate bfloat16 at a fraction of float32's speed (or not run
// it at all), so callers fall back to float32 (engine/train/precision.h).
bool Bf16ComputeSupported();

// out (B, OC) = inp (B, C) · weight (OC, C)ᵀ + bias (OC) (bias may be nullptr).
void LinearForwardFast(float* out, const float* inp, const float* weight, const float* bias, int B,
                       int C, int OC);

// Rows from which a product of FP8 weights runs as a bf16 GEMM (below).
inline constexpr int kFp8GemmMinRows = 80;
// Whether LinearForwardMaybeFp8 runs a product of `rows` rows as the bf16 GEMM here: from
// kFp8GemmMinRows rows, on the avx512 path (so EMBODY_CPU_PATH=scalar or avx2 keeps the
// weight-only product everywhere) where oneDNN runs bf16 natively.
bool Fp8RowsRunBf16Gemm(int rows);

// The same product with the weight as FP8 codes and 128 x 128 block scales when weight8 is not
// null (the inference path of a quantised policy); with weight8 null, LinearForwardFast on
// `weight`. weight8 must be (OC, C), and `weight` its dequantised values (what a quantised
// PolicyTransformer's params() hold).
//   Fp8RowsRunBf16Gemm(B): oneDNN's bf16 GEMM on `weight` (x and the dequantised weights
//     rounded to bf16, fp32 accumulation; AMX where the CPU has it). At that many rows the
//     product is bound by multiply-adds, not bytes, and a GEMM that reuses each weight across a
//     register tile of rows runs faster than re-decoding the codes for every few rows. The
//     crossover is measured: docs/benchmarks.md, "Policy inference latency".
//   otherwise: fp8::MatmulWeightFp8 (weight-only, weights decoded in registers): at few rows
//     reading the weights is the cost, and fp8 reads a quarter.
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

// This thread's GEMM rate through the active LinearCompute, in GFLOP/s: the best of repeated
// (4096 × 256) · (256 × 1024) products (the reference policy's MLP-up shape) over about `seconds`.
// The trainer's honest denominator for model FLOP utilisation: measured, not a datasheet peak.
double MeasureGemmGflops(double seconds = 0.25);

}  // namespace engine
