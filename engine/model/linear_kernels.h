// The Eigen-backed Linear and GELU kernels behind one table of function pointers, one table per
// CPU path (engine/cpu/cpu_path.h): linear_fast_sse2.cc (baseline x86-64), linear_fast_avx2.cc
// and linear_fast_avx512.cc, each the same source (linear_fast_body.inc) compiled with its own
// instruction-set flags. linear_fast.cc picks the table once per process. Internal to
// engine/model.
//
// Why three copies of one source: Eigen chooses its vector width at compile time, so one binary
// that must run on every x86-64 machine (no -march) would otherwise run 128-bit SSE2 GEMMs on a
// CPU with AVX-512. Eigen is header-only templates, and a template instantiated in two
// translation units with different flags is one symbol to the linker, which keeps either copy:
// each variant therefore gives Eigen a different index type (EIGEN_DEFAULT_DENSE_INDEX_TYPE), so
// its GEMM and kernel instantiations have names of their own. isa_symbols_test checks the
// objects for any other shared symbol, and isa_valgrind_test runs a whole step on a CPU without
// AVX-512.
#pragma once

namespace engine::linear {

struct LinearKernels {
  const char* name;
  void (*forward)(float* out, const float* inp, const float* weight, const float* bias, int B,
                  int C, int OC);
  void (*backward)(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, int B, int C, int OC, bool overwrite_dinp);
  void (*gelu_forward)(float* out, const float* inp, long N);
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, long N);
  void (*gelu_grad_in_place)(float* grad, const float* inp, long N);
  // Seconds of the fastest of `reps` products y (m, n) = x (m, k) · w (n, k)ᵀ on random data.
  double (*time_gemm)(int m, int n, int k, int reps);
};

const LinearKernels& Sse2Kernels();
const LinearKernels& Avx2Kernels();
const LinearKernels& Avx512Kernels();

}  // namespace engine::linear
