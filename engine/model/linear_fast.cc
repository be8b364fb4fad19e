// Dispatch of the fast Linear and GELU layers to the copy of the Eigen kernels compiled for this
// CPU (linear_kernels.h): chosen once per process from engine/fp8/cpu_path.h's path, so
// EMBODY_CPU_PATH forces it here too (scalar runs the baseline SSE2 copy).
#include "engine/model/linear_fast.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "engine/fp8/cpu_path.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/model/linear_kernels.h"

namespace engine {
namespace {

const linear::LinearKernels& LinearKernelsFor(fp8::CpuPath path) {
  switch (path) {
    case fp8::CpuPath::kAvx512:
      return linear::Avx512Kernels();
    case fp8::CpuPath::kAvx2:
      return linear::Avx2Kernels();
    case fp8::CpuPath::kScalar:
      break;
  }
  return linear::Sse2Kernels();
}

const linear::LinearKernels& Active() {
  static const linear::LinearKernels& table = LinearKernelsFor(fp8::ActiveCpuPath());
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

}  // namespace

const char* LinearKernelsName() { return Active().name; }

void LinearForwardFast(float* out, const float* inp, const float* weight, const float* bias, int B,
                       int C, int OC) {
  For(B, C, OC).forward(out, inp, weight, bias, B, C, OC);
}

void LinearForwardMaybeFp8(float* out, const float* inp, const float* weight,
                           const fp8::Fp8Matrix* weight8, const float* bias, int B, int C, int OC) {
  if (weight8 == nullptr) {
    LinearForwardFast(out, inp, weight, bias, B, C, OC);
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
  // One product tells how many fit in `seconds`; at least 3, at most 1,000.
  const double once = Active().time_gemm(kM, kN, kK, 1);
  const int reps = static_cast<int>(std::min(1000.0, std::max(3.0, seconds / once)));
  return kFlops / Active().time_gemm(kM, kN, kK, reps) / 1e9;
}

}  // namespace engine
