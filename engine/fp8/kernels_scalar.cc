// The scalar kernel table: plain loops over the reference codec in fp8_format.h. It is the
// reference the AVX2 and AVX-512 tables are tested against (codecs bit for bit, matmuls within
// a summation-order tolerance) and the path of machines without AVX2.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/fp8/fp8_format.h"
#include "engine/fp8/kernels.h"

namespace engine::fp8 {
namespace {

void EncodeScalarKernel(Format f, const float* in, long n, float inv_scale, uint8_t* out,
                        EncodeCounts* counts) {
  const FormatBits& b = Bits(f);
  EncodeCounts c;
  for (long i = 0; i < n; ++i) {
    const float v = in[i] * inv_scale;
    const uint8_t code = EncodeScalar(f, v);
    out[i] = code;
    const uint32_t a = std::bit_cast<uint32_t>(v) & 0x7fffffffu;
    const bool nan = a > 0x7f800000u;
    c.nan += nan;
    c.saturated += !nan && a > b.saturate_above_bits;
    c.underflowed += !nan && in[i] != 0.0f && (code & 0x7f) == 0;
  }
  if (counts != nullptr) {
    counts->saturated += c.saturated;
    counts->underflowed += c.underflowed;
    counts->nan += c.nan;
  }
}

void DecodeScalarKernel(Format f, const uint8_t* in, long n, float scale, float* out) {
  for (long i = 0; i < n; ++i) {
    const float v = DecodeScalar(f, in[i]);
    out[i] = IsNanCode(f, in[i]) ? v : v * scale;
  }
}

float FiniteAmaxScalar(const float* in, long n) {
  uint32_t m = 0;
  for (long i = 0; i < n; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(in[i]) & 0x7fffffffu;
    if (a < 0x7f800000u && a > m) m = a;
  }
  return std::bit_cast<float>(m);
}

bool HasNanScalar(Format f, const uint8_t* in, long n) {
  for (long i = 0; i < n; ++i) {
    if (IsNanCode(f, in[i])) return true;
  }
  return false;
}

long ColBlocks(int cols) { return (cols + kBlock - 1) / kBlock; }

// Dequantised element (r, c) of a blocked matrix.
float Dequant(const Fp8MatrixView& m, long r, long c) {
  const float s = m.scales[(r / m.block_rows) * ColBlocks(m.cols) + c / kBlock];
  return DecodeScalar(m.format, m.codes[r * m.cols + c]) * s;
}

void MatmulW8Scalar(const float* x, int M, const Fp8MatrixView& w, bool /*w_has_nan*/, float* y) {
  const long K = w.cols, N = w.rows;
  for (long m = 0; m < M; ++m) {
    for (long n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (long k = 0; k < K; ++k) acc += x[m * K + k] * Dequant(w, n, k);
      y[m * N + n] = acc;
    }
  }
}

void MatmulX8W8Scalar(const Fp8MatrixView& x, const Fp8MatrixView& w, float* /*scratch*/,
                      float* y) {
  const long K = w.cols, N = w.rows, M = x.rows;
  for (long m = 0; m < M; ++m) {
    for (long n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (long k = 0; k < K; ++k) acc += Dequant(x, m, k) * Dequant(w, n, k);
      y[m * N + n] = acc;
    }
  }
}

constexpr KernelTable kScalarTable{cpu::CpuPath::kScalar, EncodeScalarKernel, DecodeScalarKernel,
                                   FiniteAmaxScalar, HasNanScalar,       MatmulW8Scalar,
                                   MatmulX8W8Scalar};

}  // namespace

const KernelTable& ScalarKernels() { return kScalarTable; }

const KernelTable& KernelsFor(cpu::CpuPath path) {
  const KernelTable* t = nullptr;
  switch (path) {
    case cpu::CpuPath::kScalar:
      return kScalarTable;
    case cpu::CpuPath::kAvx2:
      t = Avx2Kernels();
      break;
    case cpu::CpuPath::kAvx512:
      t = Avx512Kernels();
      break;
  }
  if (t == nullptr || !cpu::CpuSupports(path)) {
    std::fprintf(stderr, "fatal: fp8 kernels for %s requested on a CPU without it\n",
                 cpu::CpuPathName(path));
    std::abort();
  }
  return *t;
}

}  // namespace engine::fp8
