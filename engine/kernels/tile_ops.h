// Small dense building blocks shared by the attention kernels (private to engine/kernels):
// register-blocked row-major GEMM variants, row max/sum reductions and an exp(), written with
// GCC/Clang vector extensions (portable across ISAs, no intrinsics) because the compiler alone
// keeps neither the accumulators in registers nor float reductions and std::exp vectorised
// without -ffast-math.
//
// All matrices are row-major with an explicit leading dimension (elements between rows).
//
// Everything is in an anonymous namespace: the attention kernels are compiled once per CPU path
// with different instruction-set flags (attention_varlen_kernels.h), and an inline function with
// external linkage would be one symbol to the linker, which could hand the AVX-512 copy to the
// baseline path. Internal linkage gives every translation unit its own copy.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace engine::kernels::tile {
namespace {

// Register blocking: a block of kRows rows × kCols columns of C stays in registers over the whole
// k loop, so each step loads one row segment of B and kRows scalars of A for kRows × kCols
// multiply-adds. GCC/Clang vector extensions (not ISA intrinsics) make the accumulators
// registers; the compiler maps them to whatever SIMD the target has. Column tails narrower than
// kCols fall back to plain loops.
using Vec = float __attribute__((vector_size(32)));  // 8 floats
constexpr int kVecWidth = 8;
constexpr int kRows = 4;
constexpr int kColVecs = 2;
constexpr int kCols = kColVecs * kVecWidth;

Vec LoadVec(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void StoreVec(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// The kRows × kCols block of C at (i, j0) += Σ_p a(r, p) · B[p][j0 ..], where a(r, p) is
// a[r·a_row + p·a_col]: (a_row, a_col) = (lda, 1) reads A, (1, lda) reads Aᵀ.
void BlockKernel(float* __restrict c, int ldc, const float* __restrict a, long a_row,
                        long a_col, const float* __restrict b, int ldb, int k, bool accumulate) {
  Vec acc[kRows][kColVecs];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kColVecs; ++v) {
      acc[r][v] = accumulate ? LoadVec(c + static_cast<long>(r) * ldc + v * kVecWidth) : Vec{};
    }
  }
  for (int p = 0; p < k; ++p) {
    const float* brow = b + static_cast<long>(p) * ldb;
    Vec bv[kColVecs];
    for (int v = 0; v < kColVecs; ++v) bv[v] = LoadVec(brow + v * kVecWidth);
    for (int r = 0; r < kRows; ++r) {
      const float av = a[r * a_row + p * a_col];
      for (int v = 0; v < kColVecs; ++v) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kColVecs; ++v) {
      StoreVec(c + static_cast<long>(r) * ldc + v * kVecWidth, acc[r][v]);
    }
  }
}

// One row of C, kCols wide: the leftover rows below the last full block.
void RowKernel(float* __restrict c, const float* __restrict a, long a_col,
                      const float* __restrict b, int ldb, int k, bool accumulate) {
  Vec acc[kColVecs];
  for (int v = 0; v < kColVecs; ++v) acc[v] = accumulate ? LoadVec(c + v * kVecWidth) : Vec{};
  for (int p = 0; p < k; ++p) {
    const float av = a[p * a_col];
    for (int v = 0; v < kColVecs; ++v) {
      acc[v] += av * LoadVec(b + static_cast<long>(p) * ldb + v * kVecWidth);
    }
  }
  for (int v = 0; v < kColVecs; ++v) StoreVec(c + v * kVecWidth, acc[v]);
}

// C (m, n) = A · B (k, n) or C += A · B, where A is (m, k) with row stride a_row = lda and
// column stride 1, or Aᵀ of a (k, m) matrix (a_row = 1, a_col = lda).
void Gemm(float* __restrict c, int ldc, const float* __restrict a, long a_row, long a_col,
                 const float* __restrict b, int ldb, int m, int n, int k, bool accumulate) {
  int j0 = 0;
  for (; j0 + kCols <= n; j0 += kCols) {
    int i = 0;
    for (; i + kRows <= m; i += kRows) {
      BlockKernel(c + static_cast<long>(i) * ldc + j0, ldc, a + i * a_row, a_row, a_col, b + j0,
                  ldb, k, accumulate);
    }
    for (; i < m; ++i) {
      RowKernel(c + static_cast<long>(i) * ldc + j0, a + i * a_row, a_col, b + j0, ldb, k,
                accumulate);
    }
  }
  if (j0 == n) return;
  for (int i = 0; i < m; ++i) {
    float* __restrict crow = c + static_cast<long>(i) * ldc;
    if (!accumulate) {
      for (int j = j0; j < n; ++j) crow[j] = 0.0f;
    }
    for (int p = 0; p < k; ++p) {
      const float av = a[i * a_row + p * a_col];
      const float* __restrict brow = b + static_cast<long>(p) * ldb;
      for (int j = j0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
}

// C (m, n) = A (m, k) · B (k, n), or C += A · B when accumulate.
void GemmNN(float* c, int ldc, const float* a, int lda, const float* b, int ldb, int m,
                   int n, int k, bool accumulate) {
  Gemm(c, ldc, a, lda, 1, b, ldb, m, n, k, accumulate);
}

// C (m, n) += Aᵀ · B with A (k, m), B (k, n).
void GemmTNAcc(float* c, int ldc, const float* a, int lda, const float* b, int ldb, int m,
                      int n, int k) {
  Gemm(c, ldc, a, 1, lda, b, ldb, m, n, k, /*accumulate=*/true);
}

// Columns rounded up to whole register blocks: callers whose B has readable (zero) columns up to
// that width, and whose C has room for them, compute the full blocks and ignore the extra.
int RoundUpToBlock(int n) { return (n + kCols - 1) / kCols * kCols; }

// exp(x) for x ≤ 88, relative error ≈ 2e-7; exactly 0 below -87 (so exp(-inf) = 0, no NaN).
// Cephes expf: x = n·ln2 + r with |r| ≤ ln2/2, degree-6 polynomial for e^r, 2^n via exponent bits.
// Written once for a vector of lanes (the hot path) and used lane-wise for scalars.
using IVec = int32_t __attribute__((vector_size(32)));

Vec ExpVec(Vec x) {
  const Vec lo = Vec{} - 87.0f, hi = Vec{} + 88.0f;
  Vec xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  // Round to nearest by the 1.5·2^23 trick (exact for |t| < 2^22).
  const Vec n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  Vec r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Vec p = Vec{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Vec y = p * r * r + r + 1.0f;
  const IVec bits = (__builtin_convertvector(n, IVec) + 127) << 23;
  const Vec scale = std::bit_cast<Vec>(bits);
  return x < lo ? Vec{} : y * scale;
}

float Exp(float x) { return ExpVec(Vec{} + x)[0]; }

// max and sum of x[0, n). Written with explicit vector lanes because, without -ffast-math, the
// compiler may not reorder a float reduction and would leave these loops scalar.
float MaxOf(const float* x, int n) {
  float m = -__builtin_inff();
  int j = 0;
  if (n >= kVecWidth) {
    Vec mv = LoadVec(x);
    for (j = kVecWidth; j + kVecWidth <= n; j += kVecWidth) {
      const Vec v = LoadVec(x + j);
      mv = mv > v ? mv : v;
    }
    for (int l = 0; l < kVecWidth; ++l) m = m > mv[l] ? m : mv[l];
  }
  for (; j < n; ++j) m = m > x[j] ? m : x[j];
  return m;
}

// x[j] = exp(x[j] - shift) for j in [0, n); returns Σ x.
float ExpShiftedSum(float* __restrict x, int n, float shift) {
  Vec sv{};
  int j = 0;
  for (; j + kVecWidth <= n; j += kVecWidth) {
    const Vec e = ExpVec(LoadVec(x + j) - shift);
    StoreVec(x + j, e);
    sv += e;
  }
  float s = 0.0f;
  for (int l = 0; l < kVecWidth; ++l) s += sv[l];
  for (; j < n; ++j) {
    x[j] = Exp(x[j] - shift);
    s += x[j];
  }
  return s;
}

// x[j] = exp(x[j] - shift) for j in [0, n).
void ExpShifted(float* __restrict x, int n, float shift) {
  int j = 0;
  for (; j + kVecWidth <= n; j += kVecWidth) StoreVec(x + j, ExpVec(LoadVec(x + j) - shift));
  for (; j < n; ++j) x[j] = Exp(x[j] - shift);
}

// Copies rows [0, rows) of head h out of a (rows, H, D) tensor into a dense (rows, D) matrix,
// times `scale`.
void GatherHead(float* __restrict dst, const float* __restrict src, int rows, int H, int D,
                       int h, float scale) {
  const long stride = static_cast<long>(H) * D;
  for (int t = 0; t < rows; ++t) {
    const float* __restrict s = src + t * stride + static_cast<long>(h) * D;
    float* __restrict d = dst + static_cast<long>(t) * D;
    for (int e = 0; e < D; ++e) d[e] = scale * s[e];
  }
}

// As GatherHead, transposed: dst is (D, ld) with dst[e][t] = src[t][h][e]; columns [rows, ld)
// are zeroed.
void GatherHeadTransposed(float* __restrict dst, int ld, const float* __restrict src,
                                 int rows, int H, int D, int h) {
  const long stride = static_cast<long>(H) * D;
  for (int e = 0; e < D; ++e) {
    for (int t = rows; t < ld; ++t) dst[static_cast<long>(e) * ld + t] = 0.0f;
  }
  for (int t = 0; t < rows; ++t) {
    const float* __restrict s = src + t * stride + static_cast<long>(h) * D;
    for (int e = 0; e < D; ++e) dst[static_cast<long>(e) * ld + t] = s[e];
  }
}

// dst[t][h][:] += scale · src[t][:] for t in [0, rows); src (rows, D) dense.
void ScatterAddHead(float* __restrict dst, const float* __restrict src, int rows, int H,
                           int D, int h, float scale) {
  const long stride = static_cast<long>(H) * D;
  for (int t = 0; t < rows; ++t) {
    float* __restrict d = dst + t * stride + static_cast<long>(h) * D;
    const float* __restrict s = src + static_cast<long>(t) * D;
    for (int e = 0; e < D; ++e) d[e] += scale * s[e];
  }
}

}  // namespace
}  // namespace engine::kernels::tile
