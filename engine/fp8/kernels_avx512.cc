// The AVX-512 (F/BW/VL) kernel table. This file alone is compiled with -mavx512f -mavx512bw
// -mavx512vl (engine/fp8/CMakeLists.txt); it runs only after engine/cpu/cpu_path.cc found those on
// the CPU.
// Everything is in an anonymous namespace and nothing outside <immintrin.h> and plain-data
// headers is used, so no AVX-512 code can leak into the baseline paths through a shared inline.
//
// Codecs: the same bit-level algorithm as fp8_format.h, 16 lanes at a time, tails by masks.
// Decoding goes through the IEEE half converter (VCVTPH2PS): an E5M2 byte is the top byte of a
// half; an E4M3 byte placed at bits 13..7 of a half (sign at 15) reads as its value × 2^-8,
// subnormals included, so one shift and one AND make a half of it.
#include <immintrin.h>

#include "engine/fp8/kernels.h"

namespace engine::fp8 {
namespace {

template <Format F>
constexpr FormatBits kBits = F == Format::kE4M3 ? kE4M3Bits : kE5M2Bits;
// The largest non-NaN magnitude code: NaN codes are the magnitudes above it.
template <Format F>
constexpr int kNanAbove = F == Format::kE4M3 ? 0x7e : 0x7c;
// What the half-based decode must be multiplied by to give the value.
template <Format F>
constexpr float kHalfToValue = F == Format::kE4M3 ? 256.0f : 1.0f;

__mmask16 LiveMask(long left) {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}

int Count(__mmask16 m) { return __builtin_popcount(static_cast<unsigned>(m)); }

template <Format F>
void Encode(const float* in, long n, float inv_scale, uint8_t* out, EncodeCounts* counts) {
  constexpr FormatBits b = kBits<F>;
  constexpr unsigned shift = 23 - b.mantissa_bits;
  const __m512 inv = _mm512_set1_ps(inv_scale);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i sat = _mm512_set1_epi32(static_cast<int>(b.saturate_above_bits));
  const __m512i max_bits = _mm512_set1_epi32(static_cast<int>(b.max_bits));
  const __m512i min_normal = _mm512_set1_epi32(static_cast<int>(b.min_normal_bits));
  const __m512i magic_bits = _mm512_set1_epi32(static_cast<int>(b.subnormal_magic_bits));
  const __m512 magic = _mm512_castsi512_ps(magic_bits);
  const __m512i round = _mm512_set1_epi32((1 << (shift - 1)) - 1);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i rebias = _mm512_set1_epi32(static_cast<int>(b.rebias_bits));
  const __m512i nan_code = _mm512_set1_epi32(0x7f);
  const __m512i sign_bit = _mm512_set1_epi32(0x80);
  const __m512i zero = _mm512_setzero_si512();
  long saturated = 0, underflowed = 0, nans = 0;
  for (long i = 0; i < n; i += 16) {
    const __mmask16 live = LiveMask(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(live, in + i);  // dead lanes are 0: counted nowhere
    const __m512i u = _mm512_castps_si512(_mm512_mul_ps(x, inv));
    const __m512i a = _mm512_and_si512(u, abs_mask);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, inf);
    const __mmask16 sat_m = _mm512_mask_cmpgt_epu32_mask(static_cast<__mmask16>(~nan), a, sat);
    const __m512i ac = _mm512_min_epu32(a, max_bits);
    const __m512i r = _mm512_add_epi32(_mm512_add_epi32(ac, round),
                                       _mm512_and_si512(_mm512_srli_epi32(ac, shift), one));
    const __m512i mag_normal = _mm512_srli_epi32(_mm512_sub_epi32(r, rebias), shift);
    const __m512i mag_sub = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(ac), magic)), magic_bits);
    const __mmask16 sub = _mm512_cmplt_epu32_mask(ac, min_normal);
    __m512i mag = _mm512_mask_blend_epi32(sub, mag_normal, mag_sub);
    mag = _mm512_mask_mov_epi32(mag, nan, nan_code);
    const __m512i code = _mm512_or_si512(mag, _mm512_and_si512(_mm512_srli_epi32(u, 24), sign_bit));
    _mm512_mask_cvtepi32_storeu_epi8(out + i, live, code);
    const __mmask16 nonzero_in = _mm512_test_epi32_mask(_mm512_castps_si512(x), abs_mask);
    const __mmask16 under =
        _mm512_mask_cmpeq_epi32_mask(static_cast<__mmask16>(nonzero_in & ~nan), mag, zero);
    saturated += Count(sat_m);
    underflowed += Count(under);
    nans += Count(nan);
  }
  if (counts != nullptr) {
    counts->saturated += saturated;
    counts->underflowed += underflowed;
    counts->nan += nans;
  }
}

// 16 codes → their values × 2^-8 (E4M3) or × 1 (E5M2); NaN codes give garbage here.
template <Format F>
__m512 HalfDecode(__m128i codes) {
  __m256i h;
  if constexpr (F == Format::kE4M3) {
    // Sign-extending puts the sign in bit 15 after the shift; the AND drops the copy of it
    // that lands in bit 14, the top exponent bit a half has and E4M3 lacks.
    h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7),
                         _mm256_set1_epi16(static_cast<short>(0xBF80)));
  } else {
    h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(codes), 8);
  }
  return _mm512_cvtph_ps(h);
}

// 32 codes → two vectors of 16 values, as HalfDecode.
template <Format F>
void HalfDecode32(__m256i codes, __m512* lo, __m512* hi) {
  __m512i h;
  if constexpr (F == Format::kE4M3) {
    h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(codes), 7),
                         _mm512_set1_epi16(static_cast<short>(0xBF80)));
  } else {
    h = _mm512_slli_epi16(_mm512_cvtepu8_epi16(codes), 8);
  }
  *lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  *hi = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_shuffle_i64x2(h, h, 0xEE)));
}

template <Format F>
__mmask16 NanLanes(__m128i codes) {
  return _mm_cmpgt_epu8_mask(_mm_and_si128(codes, _mm_set1_epi8(0x7f)),
                             _mm_set1_epi8(static_cast<char>(kNanAbove<F>)));
}

// Canonical quiet NaN carrying each code's sign.
__m512 SignedNan(__m128i codes) {
  const __m512i sign =
      _mm512_slli_epi32(_mm512_and_si512(_mm512_cvtepu8_epi32(codes), _mm512_set1_epi32(0x80)), 24);
  return _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x7fc00000)));
}

template <Format F>
void Decode(const uint8_t* in, long n, float scale, float* out) {
  const __m512 to_value = _mm512_set1_ps(kHalfToValue<F>);
  const __m512 s = _mm512_set1_ps(scale);
  for (long i = 0; i < n; i += 16) {
    const __mmask16 live = LiveMask(n - i);
    const __m128i c = _mm_maskz_loadu_epi8(live, in + i);
    // Exact value first, then one rounding for the scale: the scalar path's order.
    __m512 v = _mm512_mul_ps(_mm512_mul_ps(HalfDecode<F>(c), to_value), s);
    v = _mm512_mask_mov_ps(v, NanLanes<F>(c), SignedNan(c));
    _mm512_mask_storeu_ps(out + i, live, v);
  }
}

void EncodeAny(Format f, const float* in, long n, float inv_scale, uint8_t* out,
               EncodeCounts* counts) {
  if (f == Format::kE4M3) {
    Encode<Format::kE4M3>(in, n, inv_scale, out, counts);
  } else {
    Encode<Format::kE5M2>(in, n, inv_scale, out, counts);
  }
}

void DecodeAny(Format f, const uint8_t* in, long n, float scale, float* out) {
  if (f == Format::kE4M3) {
    Decode<Format::kE4M3>(in, n, scale, out);
  } else {
    Decode<Format::kE5M2>(in, n, scale, out);
  }
}

float FiniteAmax(const float* in, long n) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  __m512i m = _mm512_setzero_si512();
  for (long i = 0; i < n; i += 16) {
    const __m512i a = _mm512_and_si512(_mm512_maskz_loadu_epi32(LiveMask(n - i), in + i), abs_mask);
    m = _mm512_mask_max_epu32(m, _mm512_cmplt_epu32_mask(a, inf), m, a);
  }
  alignas(64) unsigned lanes[16];
  _mm512_store_si512(lanes, m);
  unsigned bits = 0;
  for (int i = 0; i < 16; ++i) bits = lanes[i] > bits ? lanes[i] : bits;
  float out;
  __builtin_memcpy(&out, &bits, sizeof out);
  return out;
}

bool HasNan(Format f, const uint8_t* in, long n) {
  const __m512i low7 = _mm512_set1_epi8(0x7f);
  const __m512i above = _mm512_set1_epi8(
      static_cast<char>(f == Format::kE4M3 ? kNanAbove<Format::kE4M3> : kNanAbove<Format::kE5M2>));
  for (long i = 0; i < n; i += 64) {
    const long left = n - i;
    const __mmask64 live = left >= 64 ? ~0ull : (1ull << left) - 1;
    const __m512i c = _mm512_and_si512(_mm512_maskz_loadu_epi8(live, in + i), low7);
    if (_mm512_cmpgt_epu8_mask(c, above) != 0) return true;
  }
  return false;
}

long ColBlocks(long cols) { return (cols + kBlock - 1) / kBlock; }

// Weight-only product for MR rows of x and up to 4 rows of w (the rest repeat the last row
// and are not written). Each 16-weight vector is decoded and scaled once, in registers, and
// used for MR rows: at the batch sizes of policy inference the weights' bytes are the cost.
template <Format F, bool kNan, int MR>
void W8Tile(const float* x, long K, const Fp8MatrixView& w, long n0, int n_rows, long m0, float* y,
            long N) {
  const long kb_count = ColBlocks(K);
  const uint8_t* wr[4];
  const float* sr[4];
  for (int j = 0; j < 4; ++j) {
    const long row = n0 + (j < n_rows ? j : n_rows - 1);
    wr[j] = w.codes + row * K;
    sr[j] = w.scales + (row / w.block_rows) * kb_count;
  }
  // At MR ≤ 2 the two halves of each 32-step accumulate apart: two FMA chains per (row, column)
  // instead of one twice as long (FMA latency bounds the batch-1 loop otherwise).
  constexpr bool kSplit = MR <= 2;
  __m512 acc[MR][4], acc_hi[kSplit ? MR : 1][4];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (auto& row : acc_hi) {
    for (auto& v : row) v = _mm512_setzero_ps();
  }
  for (long kb = 0; kb < kb_count; ++kb) {
    __m512 sv[4];
    for (int j = 0; j < 4; ++j) sv[j] = _mm512_set1_ps(sr[j][kb] * kHalfToValue<F>);
    const long k_end = (kb + 1) * kBlock < K ? (kb + 1) * kBlock : K;
    for (long k = kb * kBlock; k < k_end; k += 32) {
      // 32 weights a row per step: one widening, shift and AND for two converter inputs.
      const long left = k_end - k;
      const __mmask32 live = left >= 32 ? ~0u : (1u << left) - 1;
      const __mmask16 live_lo = static_cast<__mmask16>(live), live_hi = live >> 16;
      __m512 w_lo[4], w_hi[4];
      for (int j = 0; j < 4; ++j) {
        const __m256i c = _mm256_maskz_loadu_epi8(live, wr[j] + k);
        HalfDecode32<F>(c, &w_lo[j], &w_hi[j]);
        w_lo[j] = _mm512_mul_ps(w_lo[j], sv[j]);
        w_hi[j] = _mm512_mul_ps(w_hi[j], sv[j]);
        if constexpr (kNan) {
          const __m128i c_lo = _mm256_castsi256_si128(c), c_hi = _mm256_extracti128_si256(c, 1);
          w_lo[j] = _mm512_mask_mov_ps(w_lo[j], NanLanes<F>(c_lo), SignedNan(c_lo));
          w_hi[j] = _mm512_mask_mov_ps(w_hi[j], NanLanes<F>(c_hi), SignedNan(c_hi));
        }
      }
      for (int i = 0; i < MR; ++i) {
        const float* xr = x + (m0 + i) * K + k;
        const __m512 x_lo = _mm512_maskz_loadu_ps(live_lo, xr);
        const __m512 x_hi = _mm512_maskz_loadu_ps(live_hi, xr + 16);
        for (int j = 0; j < 4; ++j) {
          acc[i][j] = _mm512_fmadd_ps(x_lo, w_lo[j], acc[i][j]);
          if constexpr (kSplit) {
            acc_hi[i][j] = _mm512_fmadd_ps(x_hi, w_hi[j], acc_hi[i][j]);
          } else {
            acc[i][j] = _mm512_fmadd_ps(x_hi, w_hi[j], acc[i][j]);
          }
        }
      }
    }
  }
  if constexpr (kSplit) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_add_ps(acc[i][j], acc_hi[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < n_rows; ++j) y[(m0 + i) * N + n0 + j] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

template <Format F, bool kNan>
void MatmulW8Typed(const float* x, int M, const Fp8MatrixView& w, float* y) {
  const long K = w.cols, N = w.rows;
  for (long n0 = 0; n0 < N; n0 += 4) {
    const int n_rows = N - n0 >= 4 ? 4 : static_cast<int>(N - n0);
    long m0 = 0;
    for (; m0 + 4 <= M; m0 += 4) W8Tile<F, kNan, 4>(x, K, w, n0, n_rows, m0, y, N);
    switch (M - m0) {
      case 3:
        W8Tile<F, kNan, 3>(x, K, w, n0, n_rows, m0, y, N);
        break;
      case 2:
        W8Tile<F, kNan, 2>(x, K, w, n0, n_rows, m0, y, N);
        break;
      case 1:
        W8Tile<F, kNan, 1>(x, K, w, n0, n_rows, m0, y, N);
        break;
      default:
        break;
    }
  }
}

void MatmulW8(const float* x, int M, const Fp8MatrixView& w, bool w_has_nan, float* y) {
  if (w.format == Format::kE4M3) {
    if (w_has_nan) {
      MatmulW8Typed<Format::kE4M3, true>(x, M, w, y);
    } else {
      MatmulW8Typed<Format::kE4M3, false>(x, M, w, y);
    }
  } else {
    // E5M2's NaNs and infinities come out of the half converter exactly: no blend needed.
    MatmulW8Typed<Format::kE5M2, false>(x, M, w, y);
  }
}

// fp8 × fp8: per K-block, X's rows and a 64-column panel of W are decoded (exactly, scaled)
// into L1-sized scratch, W transposed so a 4 × 64 register tile of Y takes 4 broadcasts and 4
// loads per k. Each operand is decoded once, O(M·K + N·K) against O(M·N·K) multiply-adds, so
// the product runs near fp32 GEMM speed: the CPU has no fp8 arithmetic, what fp8 saves on it
// is bytes, not FLOPs.
void MatmulX8W8(const Fp8MatrixView& x, const Fp8MatrixView& w, float* scratch, float* y) {
  const long M = x.rows, N = w.rows, K = w.cols;
  const long m_pad = (M + 3) / 4 * 4;
  const long kb_count = ColBlocks(K);
  float* xs = scratch;                      // (m_pad, kBlock)
  float* panel = scratch + m_pad * kBlock;  // (kBlock, kW8PanelCols)
  alignas(64) float row[kBlock];
  for (long kb = 0; kb < kb_count; ++kb) {
    const long k0 = kb * kBlock;
    const long kc = K - k0 < kBlock ? K - k0 : kBlock;
    for (long m = 0; m < M; ++m) {
      DecodeAny(x.format, x.codes + m * K + k0, kc, x.scales[(m / x.block_rows) * kb_count + kb],
                xs + m * kBlock);
    }
    for (long m = M; m < m_pad; ++m) {
      for (long k = 0; k < kc; ++k) xs[m * kBlock + k] = 0.0f;
    }
    for (long n0 = 0; n0 < N; n0 += kW8PanelCols) {
      const long nc = N - n0 < kW8PanelCols ? N - n0 : kW8PanelCols;
      for (long j = 0; j < kW8PanelCols; ++j) {
        if (j < nc) {
          const long n = n0 + j;
          DecodeAny(w.format, w.codes + n * K + k0, kc,
                    w.scales[(n / w.block_rows) * kb_count + kb], row);
          for (long k = 0; k < kc; ++k) panel[k * kW8PanelCols + j] = row[k];
        } else {
          for (long k = 0; k < kc; ++k) panel[k * kW8PanelCols + j] = 0.0f;
        }
      }
      __mmask16 col_live[4];
      for (int q = 0; q < 4; ++q) col_live[q] = LiveMask(nc - 16 * q > 0 ? nc - 16 * q : 0);
      for (long m0 = 0; m0 < m_pad; m0 += 4) {
        __m512 acc[4][4];
        for (int r = 0; r < 4; ++r) {
          for (int q = 0; q < 4; ++q) acc[r][q] = _mm512_setzero_ps();
        }
        const float* xr = xs + m0 * kBlock;
        for (long k = 0; k < kc; ++k) {
          const float* pk = panel + k * kW8PanelCols;
          const __m512 w0 = _mm512_loadu_ps(pk), w1 = _mm512_loadu_ps(pk + 16),
                       w2 = _mm512_loadu_ps(pk + 32), w3 = _mm512_loadu_ps(pk + 48);
          for (int r = 0; r < 4; ++r) {
            const __m512 xb = _mm512_set1_ps(xr[r * kBlock + k]);
            acc[r][0] = _mm512_fmadd_ps(xb, w0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(xb, w1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(xb, w2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(xb, w3, acc[r][3]);
          }
        }
        for (long r = 0; r < 4 && m0 + r < M; ++r) {
          float* yr = y + (m0 + r) * N + n0;
          for (int q = 0; q < 4; ++q) {
            if (col_live[q] == 0) break;
            __m512 v = acc[r][q];
            if (kb > 0) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(col_live[q], yr + 16 * q));
            _mm512_mask_storeu_ps(yr + 16 * q, col_live[q], v);
          }
        }
      }
    }
  }
}

constexpr KernelTable kTable{cpu::CpuPath::kAvx512, EncodeAny, DecodeAny, FiniteAmax,
                             HasNan,           MatmulW8,  MatmulX8W8};

}  // namespace

const KernelTable* Avx512Kernels() { return &kTable; }

}  // namespace engine::fp8
