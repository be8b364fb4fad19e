// The weight-only product on bf16 dot products (VDPBF16PS) for E4M3 and E5M2 weights, for CPUs
// with AVX512_BF16 on top of the avx512 path. This file alone is compiled with -mavx512bf16 (on
// top of the avx512 flags, engine/fp8/CMakeLists.txt); it runs only after engine/cpu/cpu_path.cc
// found AVX512_BF16 on the CPU. As in kernels_avx512.cc, everything but the one entry point is in an
// anonymous namespace and only <immintrin.h> and plain-data headers are included.
//
// Why: decoding fp8 to fp32 (a widening, a lane shuffle, two half conversions per 32 weights)
// bounds the fp32-activation kernel, not the bytes. Here a code becomes a bf16 with shifts and
// a mask and no shuffle: its sign at bit 15 and its 7 magnitude bits just below bf16's sign,
// with the format's exponent in the low bits of bf16's, read as a bf16 of value · 2^-gap, gap =
// 127 - the format's bias (Bf16Reading below):
//   E4M3 (s eeee mmm, bias 7):  magnitude at bits 10..4, value · 2^-120: (word >> 4) & 0x87F0;
//   E5M2 (s eeeee mm, bias 15): magnitude at bits 11..5, value · 2^-112: (word >> 3) & 0x8FE0.
// The shifts are arithmetic, on a word holding the code in its high byte: the sign copies into
// the bits the mask clears. 64 codes loaded as 32 words give two such vectors, the odd codes (the
// word as loaded) and the even ones (word << 8 first). VDPBF16PS multiplies word pairs (2i,
// 2i+1), i.e. codes (4i, 4i+2) of the even vector and (4i+1, 4i+3) of the odd one, so x is
// rounded to bf16 once per call into the same order, even-indexed and odd-indexed elements
// apart, and the inner loop has no shuffle at all.
//
// Both formats' smallest normal code reads as 2^-126 (2^-6 · 2^-120, 2^-14 · 2^-112), bf16's
// smallest normal; their subnormal codes read as bf16 subnormals (exactly their value · 2^-gap),
// which VDPBF16PS treats as zero. E5M2's infinity and NaN codes (exponent 11111) would read as
// finite numbers from 2^-96 up, E4M3's NaN codes as 480 · 2^-120: the product does not decode
// them but notices them on the way (two operations a load) and reports them, and the caller
// takes the fp32 kernel for that matrix, which keeps their semantics.
//
// Scaling: each x row is multiplied, before rounding, by its K-block's weight scale (normalised
// by the row block's largest) and by a power of two that puts the row's largest |x · scale| in
// [2^kTop, 2^(kTop+2)), so that products with every normal code stay normal in fp32
// (VDPBF16PS flushes subnormal inputs and results to zero) and no sum overflows; kTop (below)
// follows from each format's range. The powers of two are undone with one VSCALEFPS per output,
// which rounds once and overflows or underflows only where the exact result does.
//
// Numerics (docs/fp8.md): x · scale is rounded to bf16 (relative error ≤ 2^-8); subnormal
// codes are read as zero (each such weight is at most 2^-6 · 7/8 (E4M3) or 2^-14 · 3/4 (E5M2)
// of its block's scale); products are lost only where |x| · scale / (the row block's largest
// scale) is below 2^-kTop = 2^-125 of the row's largest |x|.
#include <immintrin.h>

#include "engine/fp8/kernels.h"

namespace engine::fp8 {
namespace {

constexpr long kChunk = 64;  // codes per 512-bit load

// How a format's codes are read as bf16 words (the top of this file).
struct Bf16Reading {
  int shift;                // arithmetic right shift of a word with the code in its high byte
  uint16_t mask;            // keeps the sign (bit 15) and the 7 magnitude bits
  int gap;                  // a normal code reads as its value · 2^-gap (127 - the bias)
  uint8_t special_doubled;  // doubled code bytes (sign dropped) from here on: not decoded
  int max_exp;              // every finite code's bf16 reading is below 2^max_exp
};
// E4M3: 448 · 2^-120 < 2^-111; NaN codes 0x7f, 0xff double to 0xfe, all others to ≤ 0xfc.
// E5M2: 57344 · 2^-112 < 2^-96; codes 0x7c..0x7f, 0xfc..0xff (inf, NaN) double to 0xf8..0xfe,
// all others to ≤ 0xf6.
template <Format F>
constexpr Bf16Reading kReading = F == Format::kE4M3 ? Bf16Reading{4, 0x87F0, 120, 0xfe, -111}
                                                    : Bf16Reading{3, 0x8FE0, 112, 0xf8, -96};

// x · 2^shift puts a row's largest |x| in [2^kTop, 2^(kTop+1)); times the normalised scales (< 2)
// every x' is below 2^(kTop+2). Below: a product x' · w' with a normal code (w' ≥ 2^-126 in both
// formats) is normal whenever |x'| ≥ 1, so products are lost only for |x| · normalised scale below
// 2^-kTop of the row's largest |x|: kTop as high as the top allows. Top: x' must be finite in bf16
// even after rounding up (2^(kTop+2) ≤ 2^127) and a sum of K < 2^31 products below 2^(kTop+2) ·
// 2^max_exp must stay below 2^128: kTop ≤ 125 and kTop ≤ 95 - max_exp (206 for E4M3, 191 for E5M2).
// The bf16 range binds for both formats; E5M2's 15 more binades at the top of the codes (sums up to
// 2^(kTop+2-96) · K instead of 2^(kTop+2-111) · K) still leave 2^66 to spare.
template <Format F>
constexpr int kTop = 125 < 95 - kReading<F>.max_exp ? 125 : 95 - kReading<F>.max_exp;
static_assert(kTop<Format::kE4M3> == 125 && kTop<Format::kE5M2> == 125);

long RoundUpToChunk(long k) { return (k + kChunk - 1) / kChunk * kChunk; }

// floor(log2(|v|)) of a positive finite float, subnormals included.
int ExponentOf(float v) {
  const __m128 a = _mm_set_ss(v);
  return static_cast<int>(_mm_cvtss_f32(_mm_getexp_ss(a, a)));
}

// The largest |x[k]| over finite elements, 0 if none.
float RowAmax(const float* x, long K) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  __m512i m = _mm512_setzero_si512();
  for (long k = 0; k < K; k += 16) {
    const long left = K - k;
    const __mmask16 live = left >= 16 ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
    const __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(live, x + k), abs_mask);
    m = _mm512_mask_max_epu32(m, _mm512_cmplt_epu32_mask(a, inf), m, a);
  }
  alignas(64) unsigned lanes[16];
  _mm512_store_si512(lanes, m);
  unsigned bits = 0;
  for (unsigned v : lanes) bits = v > bits ? v : bits;
  float out;
  __builtin_memcpy(&out, &bits, sizeof out);
  return out;
}

// One x row for one row block of w: xs[c·64 + i] = bf16(x[c·64 + 2i] · f[kb]) and
// xs[c·64 + 32 + i] = bf16(x[c·64 + 2i + 1] · f[kb]), i < 32, for every 64-chunk c, zero past
// K, where f[kb] = 2^shift · block_scale[kb] (the normalised scales, < 2).
void PrepareRow(const float* x, long K, int shift, const float* norm_scales, uint16_t* xs) {
  const __m512 two_shift = _mm512_set1_ps(static_cast<float>(shift));
  const __m512i even_idx =
      _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26,
                       24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd_idx = _mm512_add_epi16(even_idx, _mm512_set1_epi16(1));
  for (long k = 0; k < K; k += kChunk) {
    const __m512 f = _mm512_set1_ps(norm_scales[k / kBlock]);
    __m512 v[4];
    for (int q = 0; q < 4; ++q) {
      const long left = K - k - 16 * q;
      const __mmask16 live = left >= 16  ? static_cast<__mmask16>(0xffff)
                             : left <= 0 ? static_cast<__mmask16>(0)
                                         : static_cast<__mmask16>((1u << left) - 1);
      // x · 2^shift is exact (below 2^(kTop+1); shift < 0 only for a row whose largest |x| is
      // ≥ 2^126, where only elements below 2^-124 could lose bits); one rounding for the scale,
      // one for bf16.
      v[q] = _mm512_mul_ps(_mm512_scalef_ps(_mm512_maskz_loadu_ps(live, x + k + 16 * q), two_shift),
                           f);
    }
    const __m512i lo = __builtin_bit_cast(__m512i, _mm512_cvtne2ps_pbh(v[1], v[0]));  // k .. k+31
    const __m512i hi =
        __builtin_bit_cast(__m512i, _mm512_cvtne2ps_pbh(v[3], v[2]));  // k+32 .. k+63
    _mm512_storeu_si512(xs + k, _mm512_permutex2var_epi16(lo, even_idx, hi));
    _mm512_storeu_si512(xs + k + 32, _mm512_permutex2var_epi16(lo, odd_idx, hi));
  }
}

// acc + Σ of the bf16 word pairs' products of a and b (VDPBF16PS).
__m512 Dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, __builtin_bit_cast(__m512bh, a), __builtin_bit_cast(__m512bh, b));
}

// The sums of the 16 lanes of a, b, c and d, in that order.
__m128 Reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  // Per 128-bit lane: ab = [a0+a2, b0+b2, a1+a3, b1+b3], cd likewise.
  const __m512 abcd =
      _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xEE));
  const __m256 h =
      _mm256_add_ps(_mm512_castps512_ps256(abcd),
                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(abcd), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// y rows m0 .. m0+MR, columns n0 .. n0+n_cols (≤ NR, all in one row block of w) from the
// prepared rows xs (MR rows of kp words) and the codes; y = Σ · 2^exps[i]. Returns whether the
// codes read hold a code this product does not decode (E4M3 NaN, E5M2 inf or NaN).
template <Format F, int MR, int NR>
bool Tile(const uint16_t* xs, long kp, const Fp8MatrixView& w, long n0, int n_cols,
          const float* exps, float* y, long N) {
  const long K = w.cols;
  const uint8_t* wr[NR];
  for (int j = 0; j < NR; ++j) wr[j] = w.codes + (n0 + (j < n_cols ? j : n_cols - 1)) * K;
  // At one row, even and odd products accumulate apart: two chains per column instead of one
  // twice as long (VDPBF16PS latency would bound the batch-1 loop otherwise).
  constexpr bool kSplit = MR == 1;
  __m512 acc[MR][NR], acc_odd[kSplit ? MR : 1][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (auto& row : acc_odd) {
    for (auto& v : row) v = _mm512_setzero_ps();
  }
  constexpr Bf16Reading R = kReading<F>;
  const __m512i magnitude = _mm512_set1_epi16(static_cast<short>(R.mask));
  // The largest doubled code byte (x + x drops the sign): R.special_doubled or above only for
  // the codes not decoded. Two operations a load, where a separate pass over the codes would
  // cost more than the product.
  __m512i doubled_max = _mm512_setzero_si512();
  for (long k = 0; k < K; k += kChunk) {
    const long left = K - k;
    const __mmask64 live = left >= kChunk ? ~0ull : (1ull << left) - 1;
    __m512i even[NR], odd[NR];
    for (int j = 0; j < NR; ++j) {
      const __m512i c = _mm512_maskz_loadu_epi8(live, wr[j] + k);
      doubled_max = _mm512_max_epu8(doubled_max, _mm512_add_epi8(c, c));
      odd[j] = _mm512_and_si512(_mm512_srai_epi16(c, R.shift), magnitude);
      even[j] = _mm512_and_si512(_mm512_srai_epi16(_mm512_slli_epi16(c, 8), R.shift), magnitude);
    }
    for (int i = 0; i < MR; ++i) {
      const __m512i xe = _mm512_loadu_si512(xs + i * kp + k);
      const __m512i xo = _mm512_loadu_si512(xs + i * kp + k + 32);
      for (int j = 0; j < NR; ++j) {
        acc[i][j] = Dot(acc[i][j], xe, even[j]);
        if constexpr (kSplit) {
          acc_odd[i][j] = Dot(acc_odd[i][j], xo, odd[j]);
        } else {
          acc[i][j] = Dot(acc[i][j], xo, odd[j]);
        }
      }
    }
  }
  if constexpr (kSplit) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_add_ps(acc[i][j], acc_odd[i][j]);
    }
  }
  // Lane sums, four accumulators at a time, row-major (i, j) into sums.
  constexpr int kCount = MR * NR;
  alignas(16) float sums[(kCount + 3) / 4 * 4];
  const auto at = [&acc](int g) { return g < kCount ? acc[g / NR][g % NR] : _mm512_setzero_ps(); };
  for (int g = 0; g < kCount; g += 4) {
    _mm_store_ps(sums + g, Reduce4(at(g), at(g + 1), at(g + 2), at(g + 3)));
  }
  static_assert(NR <= 8, "a row's sums are one 8-float vector");
  const __mmask8 cols = static_cast<__mmask8>((1u << n_cols) - 1);
  for (int i = 0; i < MR; ++i) {
    const __m256 s = _mm256_maskz_loadu_ps(cols, sums + i * NR);
    _mm256_mask_storeu_ps(y + i * N + n0, cols, _mm256_scalef_ps(s, _mm256_set1_ps(exps[i])));
  }
  return _mm512_cmpge_epu8_mask(doubled_max,
                                _mm512_set1_epi8(static_cast<char>(R.special_doubled))) != 0;
}

// MR rows of x (≤ 5) against all of w; false as soon as a code not decoded is seen.
template <Format F, int MR, int NR>
bool RowTile(const float* x, const Fp8MatrixView& w, uint16_t* scratch, float* y) {
  const long K = w.cols, N = w.rows, kp = RoundUpToChunk(K);
  const long kb_count = (K + kBlock - 1) / kBlock;
  int x_exp[MR];
  for (int i = 0; i < MR; ++i) {
    const float amax = RowAmax(x + i * K, K);
    x_exp[i] = amax > 0.0f ? ExponentOf(amax) : 0;
  }
  for (long r0 = 0; r0 < N; r0 += w.block_rows) {
    const long r_end = r0 + w.block_rows < N ? r0 + w.block_rows : N;
    const float* scales = w.scales + (r0 / w.block_rows) * kb_count;
    // The row block's scales over its largest power of two: all < 2, the largest ≥ 1.
    float smax = 0.0f;
    for (long kb = 0; kb < kb_count; ++kb) smax = scales[kb] > smax ? scales[kb] : smax;
    const int s_exp = smax > 0.0f ? ExponentOf(smax) : 0;
    alignas(64) float norm[64];
    float exps[MR];
    // Normalised scales, one per K-block, 64 blocks (8192 columns) at a time to keep them on
    // the stack; each row is prepared against them.
    const __m128 neg_s_exp = _mm_set_ss(static_cast<float>(-s_exp));
    for (int i = 0; i < MR; ++i) {
      // x · 2^(kTop - e_x) puts the row's largest |x| in [2^kTop, 2^(kTop+1)); times the
      // normalised scales every x' is below 2^(kTop+2).
      const int shift = kTop<F> - x_exp[i];
      for (long kb_base = 0; kb_base < kb_count; kb_base += 64) {
        const long kb_n = kb_count - kb_base < 64 ? kb_count - kb_base : 64;
        for (long kb = 0; kb < kb_n; ++kb) {
          norm[kb] = _mm_cvtss_f32(_mm_scalef_ss(_mm_set_ss(scales[kb_base + kb]), neg_s_exp));
        }
        const long k0 = kb_base * kBlock;
        const long k_len = (K - k0) < 64 * kBlock ? K - k0 : 64 * kBlock;
        PrepareRow(x + i * K + k0, k_len, shift, norm, scratch + i * kp + k0);
      }
      // The dot products carry 2^-gap (the bf16 reading of the codes) and 2^shift · 2^-s_exp.
      exps[i] = static_cast<float>(kReading<F>.gap + s_exp - shift);
    }
    for (long n0 = r0; n0 < r_end; n0 += NR) {
      const int n_cols = r_end - n0 >= NR ? NR : static_cast<int>(r_end - n0);
      if (Tile<F, MR, NR>(scratch, kp, w, n0, n_cols, exps, y, N)) return false;
    }
  }
  return true;
}

template <Format F>
bool MatmulW8Bf16Typed(const float* x, int M, const Fp8MatrixView& w, uint16_t* scratch, float* y) {
  const long K = w.cols, N = w.rows;
  // Five rows a tile where there are five: each decoded weight vector serves 5 rows (20
  // accumulators, 8 decoded vectors and 2 of x: 30 of the 32 registers). Against 4 x 4 in
  // consecutive fp8_policy_bench --by-rows runs: about 5% faster from 47 rows up, no different
  // at 8 to 32; 8 x 2 and 6 x 3 were slower (more x loads per product).
  long m0 = 0;
  for (; M - m0 >= 5; m0 += 5) {
    if (!RowTile<F, 5, 4>(x + m0 * K, w, scratch, y + m0 * N)) return false;
  }
  const float* xm = x + m0 * K;
  float* ym = y + m0 * N;
  switch (M - m0) {  // the last 0 to 4 rows
    case 1:
      return RowTile<F, 1, 8>(xm, w, scratch, ym);
    case 2:
      return RowTile<F, 2, 4>(xm, w, scratch, ym);
    case 3:
      return RowTile<F, 3, 4>(xm, w, scratch, ym);
    case 4:
      return RowTile<F, 4, 4>(xm, w, scratch, ym);
    default:
      return true;
  }
}

bool MatmulW8Bf16(const float* x, int M, const Fp8MatrixView& w, uint16_t* scratch, float* y) {
  return w.format == Format::kE4M3 ? MatmulW8Bf16Typed<Format::kE4M3>(x, M, w, scratch, y)
                                   : MatmulW8Bf16Typed<Format::kE5M2>(x, M, w, scratch, y);
}

}  // namespace

MatmulW8Bf16Fn Avx512Bf16MatmulW8() { return MatmulW8Bf16; }

}  // namespace engine::fp8
