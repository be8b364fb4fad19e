// Dispatch of the fast Linear and GELU layers to the copy of the Eigen kernels compiled for this
// CPU (linear_kernels.h): chosen once per process from engine/cpu/cpu_path.h's path, so
// EMBODY_CPU_PATH forces it here too (scalar runs the baseline SSE2 copy); or to oneDNN
// (linear_onednn.h) when SetLinearCompute says so.
#include "engine/model/linear_fast.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/cpu/cpu_path.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/model/linear_kernels.h"
#include "engine/model/linear_onednn.h"

namespace engine {
namespace {

const linear::LinearKernels& LinearKernelsFor(cpu::CpuPath path) {
  switch (path) {
    case cpu::CpuPath::kAvx512:
      return linear::Avx512Kernels();
    case cpu::CpuPath::kAvx2:
      return linear::Avx2Kernels();
    case cpu::CpuPath::kScalar:
      break;
  }
  return linear::Sse2Kernels();
}

const linear::LinearKernels& Active() {
  static const linear::LinearKernels& table = LinearKernelsFor(cpu::ActiveCpuPath());
  return table;
}

// The AVX2 copy indexes with int (linear_kernels.h); a product with a larger matrix takes the
// baseline copy rather than overflow.
const linear::LinearKernels& For(long B, long C, long OC) {
  const linear::LinearKernels& k = Active();
  if (&k == &linear::Avx2Kernels() && (B * C >= INT_MAX || B * OC >= INT_MAX || C * OC >= INT_MAX)) {
    return linear::Sse2Kernels();
  }
  return k;
}

LinearCompute ReadFp32Default() {
  // Measured (docs/benchmarks.md, "GEMM backends"): oneDNN's fp32 matmul beats the AVX-512 Eigen
  // copy on every reference shape. Below AVX-512 it was not measured, so the Eigen copy for the
  // path stays (and EMBODY_CPU_PATH=scalar|avx2 keeps testing exactly those copies).
  const LinearCompute measured = cpu::ActiveCpuPath() == cpu::CpuPath::kAvx512
                                     ? LinearCompute::kOnednnFp32
                                     : LinearCompute::kEigenFp32;
  const char* forced = std::getenv("EMBODY_GEMM");
  if (forced == nullptr) return measured;
  if (std::strcmp(forced, "eigen") == 0) return LinearCompute::kEigenFp32;
  if (std::strcmp(forced, "onednn") == 0) return LinearCompute::kOnednnFp32;
  std::fprintf(stderr, "EMBODY_GEMM=%s is not eigen or onednn; using %s\n", forced,
               LinearComputeName(measured));
  return measured;
}

// -1: not chosen yet (DefaultFp32Compute on first use).
std::atomic<int> g_compute{-1};

LinearCompute Compute() {
  int c = g_compute.load(std::memory_order_relaxed);
  if (c < 0) {
    // First product with no choice made: the default, read once.
    int unset = -1;
    const int d = static_cast<int>(DefaultFp32Compute());
    c = g_compute.compare_exchange_strong(unset, d, std::memory_order_relaxed) ? d : unset;
  }
  return static_cast<LinearCompute>(c);
}

linear::OnednnType OnednnTypeOf(LinearCompute c) {
  return c == LinearCompute::kOnednnBf16 ? linear::OnednnType::kBf16 : linear::OnednnType::kF32;
}

}  // namespace

const char* LinearKernelsName() { return Active().name; }

const char* LinearComputeName(LinearCompute c) {
  switch (c) {
    case LinearCompute::kEigenFp32:
      return "eigen-fp32";
    case LinearCompute::kOnednnFp32:
      return "onednn-fp32";
    case LinearCompute::kOnednnBf16:
      return "onednn-bf16";
  }
  return "?";
}

void SetLinearCompute(LinearCompute c) {
  g_compute.store(static_cast<int>(c), std::memory_order_relaxed);
}

LinearCompute ActiveLinearCompute() { return Compute(); }

LinearCompute DefaultFp32Compute() { return ReadFp32Default(); }

bool Bf16ComputeSupported() { return linear::OnednnHasNativeBf16(); }

void LinearForwardFast(float* out, const float* inp, const float* weight, const float* bias, int B,
                       int C, int OC) {
  const LinearCompute c = Compute();
  if (c != LinearCompute::kEigenFp32) {
    linear::OnednnForward(OnednnTypeOf(c), out, inp, weight, bias, B, C, OC);
    return;
  }
  For(B, C, OC).forward(out, inp, weight, bias, B, C, OC);
}

bool Fp8RowsRunBf16Gemm(int rows) {
  return rows >= kFp8GemmMinRows && cpu::ActiveCpuPath() == cpu::CpuPath::kAvx512 &&
         Bf16ComputeSupported();
}

void LinearForwardMaybeFp8(float* out, const float* inp, const float* weight,
                           const fp8::Fp8Matrix* weight8, const float* bias, int B, int C, int OC) {
  if (weight8 == nullptr) {
    LinearForwardFast(out, inp, weight, bias, B, C, OC);
    return;
  }
  if (Fp8RowsRunBf16Gemm(B)) {
    linear::OnednnForward(linear::OnednnType::kBf16, out, inp, weight, bias, B, C, OC);
    return;
  }
  // The model checked the matrix's shape when it took it (PolicyTransformer::SetFp8Weights).
  const common::Status s = fp8::MatmulWeightFp8(out, inp, B, *weight8, bias);
  if (!s.ok()) {  // cannot happen: a bug, not bad input
    std::fprintf(stderr, "fp8 linear: %s\n", s.ToString().c_str());
    std::abort();
  }
}

void LinearBackwardFast(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, int B, int C, int OC,
                        bool overwrite_dinp) {
  const LinearCompute c = Compute();
  if (c != LinearCompute::kEigenFp32) {
    linear::OnednnBackward(OnednnTypeOf(c), dinp, dweight, dbias, dout, inp, weight, B, C, OC,
                           overwrite_dinp);
    return;
  }
  For(B, C, OC).backward(dinp, dweight, dbias, dout, inp, weight, B, C, OC, overwrite_dinp);
}

void GeluForwardFast(float* out, const float* inp, long N) { Active().gelu_forward(out, inp, N); }

void GeluBackwardFast(float* dinp, const float* inp, const float* dout, long N) {
  Active().gelu_backward(dinp, inp, dout, N);
}

void GeluGradInPlace(float* grad, const float* inp, long N) {
  Active().gelu_grad_in_place(grad, inp, N);
}

double MeasureGemmGflops(double seconds) {
  constexpr int kM = 4096, kK = 256, kN = 1024;
  constexpr double kFlops = 2.0 * kM * kK * kN;
  const LinearCompute c = Compute();
  auto time = [&](int reps) {
    return c == LinearCompute::kEigenFp32 ? Active().time_gemm(kM, kN, kK, reps)
                                          : linear::OnednnTimeGemm(OnednnTypeOf(c), kM, kN, kK, reps);
  };
  // One product tells how many fit in `seconds`; at least 3, at most 1,000.
  const double once = time(1);
  const int reps = static_cast<int>(std::min(1000.0, std::max(3.0, seconds / once)));
  return kFlops / time(reps) / 1e9;
}

}  // namespace engine
