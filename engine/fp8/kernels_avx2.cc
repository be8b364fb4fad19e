// The AVX2 kernel table (AVX2 + FMA + F16C + POPCNT): the path of x86-64 machines without
// AVX-512. This file alone is compiled with those flags (engine/fp8/CMakeLists.txt). The same
// algorithms as kernels_avx512.cc at 8 lanes; without mask registers, a tail shorter than a
// vector goes through a zero-padded copy (zeros are counted nowhere and add nothing).
// Everything is in an anonymous namespace and only plain-data headers are included, for the
// reason given in kernels.h.
#include <immintrin.h>

#include "engine/fp8/kernels.h"

namespace engine::fp8 {
namespace {

template <Format F>
constexpr FormatBits kBits = F == Format::kE4M3 ? kE4M3Bits : kE5M2Bits;
template <Format F>
constexpr int kNanAbove = F == Format::kE4M3 ? 0x7e : 0x7c;
template <Format F>
constexpr float kHalfToValue = F == Format::kE4M3 ? 256.0f : 1.0f;

int Count(__m256i lane_mask) {
  return __builtin_popcount(
      static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(lane_mask))));
}

// Up to 8 floats, zero-padded.
__m256 LoadFloats(const float* p, long left) {
  if (left >= 8) return _mm256_loadu_ps(p);
  alignas(32) float tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (long i = 0; i < left; ++i) tmp[i] = p[i];
  return _mm256_load_ps(tmp);
}

// Up to 8 codes in the low 8 bytes, zero-padded.
__m128i LoadCodes(const uint8_t* p, long left) {
  if (left >= 8) return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  alignas(16) uint8_t tmp[16] = {};
  for (long i = 0; i < left; ++i) tmp[i] = p[i];
  return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
}

template <Format F>
void Encode(const float* in, long n, float inv_scale, uint8_t* out, EncodeCounts* counts) {
  constexpr FormatBits b = kBits<F>;
  constexpr int shift = 23 - static_cast<int>(b.mantissa_bits);
  const __m256 inv = _mm256_set1_ps(inv_scale);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i sat = _mm256_set1_epi32(static_cast<int>(b.saturate_above_bits));
  const __m256i max_bits = _mm256_set1_epi32(static_cast<int>(b.max_bits));
  const __m256i min_normal = _mm256_set1_epi32(static_cast<int>(b.min_normal_bits));
  const __m256i magic_bits = _mm256_set1_epi32(static_cast<int>(b.subnormal_magic_bits));
  const __m256 magic = _mm256_castsi256_ps(magic_bits);
  const __m256i round = _mm256_set1_epi32((1 << (shift - 1)) - 1);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i rebias = _mm256_set1_epi32(static_cast<int>(b.rebias_bits));
  const __m256i nan_code = _mm256_set1_epi32(0x7f);
  const __m256i sign_bit = _mm256_set1_epi32(0x80);
  const __m256i zero = _mm256_setzero_si256();
  long saturated = 0, underflowed = 0, nans = 0;
  for (long i = 0; i < n; i += 8) {
    const __m256 x = LoadFloats(in + i, n - i);
    const __m256i u = _mm256_castps_si256(_mm256_mul_ps(x, inv));
    // All compared values are below 2^31, so signed compares order them as unsigned.
    const __m256i a = _mm256_and_si256(u, abs_mask);
    const __m256i nan = _mm256_cmpgt_epi32(a, inf);
    const __m256i sat_m = _mm256_andnot_si256(nan, _mm256_cmpgt_epi32(a, sat));
    const __m256i ac = _mm256_min_epi32(a, max_bits);
    const __m256i r = _mm256_add_epi32(_mm256_add_epi32(ac, round),
                                       _mm256_and_si256(_mm256_srli_epi32(ac, shift), one));
    const __m256i mag_normal = _mm256_srli_epi32(_mm256_sub_epi32(r, rebias), shift);
    const __m256i mag_sub = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(ac), magic)), magic_bits);
    const __m256i sub = _mm256_cmpgt_epi32(min_normal, ac);
    __m256i mag = _mm256_blendv_epi8(mag_normal, mag_sub, sub);
    mag = _mm256_blendv_epi8(mag, nan_code, nan);
    const __m256i code = _mm256_or_si256(mag, _mm256_and_si256(_mm256_srli_epi32(u, 24), sign_bit));
    const __m128i p16 =
        _mm_packus_epi32(_mm256_castsi256_si128(code), _mm256_extracti128_si256(code, 1));
    const __m128i p8 = _mm_packus_epi16(p16, p16);
    if (n - i >= 8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), p8);
    } else {
      alignas(16) uint8_t tmp[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), p8);
      for (long j = 0; j < n - i; ++j) out[i + j] = tmp[j];
    }
    const __m256i zero_in =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(x), abs_mask), zero);
    const __m256i under =
        _mm256_andnot_si256(_mm256_or_si256(nan, zero_in), _mm256_cmpeq_epi32(mag, zero));
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

// 8 codes (low bytes) → their values × 2^-8 (E4M3) or × 1 (E5M2); NaN codes give garbage.
template <Format F>
__m256 HalfDecode(__m128i codes) {
  __m128i h;
  if constexpr (F == Format::kE4M3) {
    h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(codes), 7),
                      _mm_set1_epi16(static_cast<short>(0xBF80)));
  } else {
    h = _mm_slli_epi16(_mm_cvtepu8_epi16(codes), 8);
  }
  return _mm256_cvtph_ps(h);
}

// All-ones 32-bit lanes where the code is a NaN code.
template <Format F>
__m256 NanLanes(__m128i codes) {
  const __m128i m8 = _mm_cmpgt_epi8(_mm_and_si128(codes, _mm_set1_epi8(0x7f)),
                                    _mm_set1_epi8(static_cast<char>(kNanAbove<F>)));
  return _mm256_castsi256_ps(_mm256_cvtepi8_epi32(m8));
}

__m256 SignedNan(__m128i codes) {
  const __m256i sign =
      _mm256_slli_epi32(_mm256_and_si256(_mm256_cvtepu8_epi32(codes), _mm256_set1_epi32(0x80)), 24);
  return _mm256_castsi256_ps(_mm256_or_si256(sign, _mm256_set1_epi32(0x7fc00000)));
}

template <Format F>
void Decode(const uint8_t* in, long n, float scale, float* out) {
  const __m256 to_value = _mm256_set1_ps(kHalfToValue<F>);
  const __m256 s = _mm256_set1_ps(scale);
  for (long i = 0; i < n; i += 8) {
    const __m128i c = LoadCodes(in + i, n - i);
    __m256 v = _mm256_mul_ps(_mm256_mul_ps(HalfDecode<F>(c), to_value), s);
    v = _mm256_blendv_ps(v, SignedNan(c), NanLanes<F>(c));
    if (n - i >= 8) {
      _mm256_storeu_ps(out + i, v);
    } else {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, v);
      for (long j = 0; j < n - i; ++j) out[i + j] = tmp[j];
    }
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
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  __m256i m = _mm256_setzero_si256();
  for (long i = 0; i < n; i += 8) {
    const __m256i a = _mm256_and_si256(_mm256_castps_si256(LoadFloats(in + i, n - i)), abs_mask);
    m = _mm256_max_epi32(m, _mm256_and_si256(a, _mm256_cmpgt_epi32(inf, a)));
  }
  alignas(32) int lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  int best = 0;
  for (int i = 0; i < 8; ++i) best = lanes[i] > best ? lanes[i] : best;
  float out;
  __builtin_memcpy(&out, &best, sizeof out);
  return out;
}

bool HasNan(Format f, const uint8_t* in, long n) {
  const int above = f == Format::kE4M3 ? kNanAbove<Format::kE4M3> : kNanAbove<Format::kE5M2>;
  const __m256i low7 = _mm256_set1_epi8(0x7f);
  const __m256i above_v = _mm256_set1_epi8(static_cast<char>(above));
  long i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i c =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)), low7);
    if (_mm256_movemask_epi8(_mm256_cmpgt_epi8(c, above_v)) != 0) return true;
  }
  for (; i < n; ++i) {
    if ((in[i] & 0x7f) > above) return true;
  }
  return false;
}

long ColBlocks(long cols) { return (cols + kBlock - 1) / kBlock; }

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Weight-only tile: MR (≤ 2, for 16 registers) rows of x against up to 4 rows of w.
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
  __m256 acc[MR][4];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (long kb = 0; kb < kb_count; ++kb) {
    __m256 sv[4];
    for (int j = 0; j < 4; ++j) sv[j] = _mm256_set1_ps(sr[j][kb] * kHalfToValue<F>);
    const long k_end = (kb + 1) * kBlock < K ? (kb + 1) * kBlock : K;
    for (long k = kb * kBlock; k < k_end; k += 8) {
      const long left = k_end - k;
      __m256 wv[4];
      for (int j = 0; j < 4; ++j) {
        const __m128i c = LoadCodes(wr[j] + k, left);
        wv[j] = _mm256_mul_ps(HalfDecode<F>(c), sv[j]);
        if constexpr (kNan) wv[j] = _mm256_blendv_ps(wv[j], SignedNan(c), NanLanes<F>(c));
      }
      for (int i = 0; i < MR; ++i) {
        const __m256 xv = LoadFloats(x + (m0 + i) * K + k, left);
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < n_rows; ++j) y[(m0 + i) * N + n0 + j] = HorizontalSum(acc[i][j]);
  }
}

template <Format F, bool kNan>
void MatmulW8Typed(const float* x, int M, const Fp8MatrixView& w, float* y) {
  const long K = w.cols, N = w.rows;
  for (long n0 = 0; n0 < N; n0 += 4) {
    const int n_rows = N - n0 >= 4 ? 4 : static_cast<int>(N - n0);
    long m0 = 0;
    for (; m0 + 2 <= M; m0 += 2) W8Tile<F, kNan, 2>(x, K, w, n0, n_rows, m0, y, N);
    if (m0 < M) W8Tile<F, kNan, 1>(x, K, w, n0, n_rows, m0, y, N);
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
    MatmulW8Typed<Format::kE5M2, false>(x, M, w, y);
  }
}

// fp8 × fp8, as in kernels_avx512.cc, with a 4 × 16 register tile swept across the 64-column
// panel.
void MatmulX8W8(const Fp8MatrixView& x, const Fp8MatrixView& w, float* scratch, float* y) {
  const long M = x.rows, N = w.rows, K = w.cols;
  const long m_pad = (M + 3) / 4 * 4;
  const long kb_count = ColBlocks(K);
  float* xs = scratch;
  float* panel = scratch + m_pad * kBlock;
  alignas(32) float row[kBlock];
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
      for (long m0 = 0; m0 < m_pad; m0 += 4) {
        const float* xr = xs + m0 * kBlock;
        for (long c0 = 0; c0 < nc; c0 += 16) {
          __m256 acc[4][2];
          for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
          for (long k = 0; k < kc; ++k) {
            const float* pk = panel + k * kW8PanelCols + c0;
            const __m256 w0 = _mm256_loadu_ps(pk), w1 = _mm256_loadu_ps(pk + 8);
            for (int r = 0; r < 4; ++r) {
              const __m256 xb = _mm256_broadcast_ss(xr + r * kBlock + k);
              acc[r][0] = _mm256_fmadd_ps(xb, w0, acc[r][0]);
              acc[r][1] = _mm256_fmadd_ps(xb, w1, acc[r][1]);
            }
          }
          const long cols = nc - c0 < 16 ? nc - c0 : 16;
          for (long r = 0; r < 4 && m0 + r < M; ++r) {
            float* yr = y + (m0 + r) * N + n0 + c0;
            alignas(32) float tile[16];
            _mm256_store_ps(tile, acc[r][0]);
            _mm256_store_ps(tile + 8, acc[r][1]);
            if (kb == 0) {
              for (long c = 0; c < cols; ++c) yr[c] = tile[c];
            } else {
              for (long c = 0; c < cols; ++c) yr[c] += tile[c];
            }
          }
        }
      }
    }
  }
}

constexpr KernelTable kTable{cpu::CpuPath::kAvx2, EncodeAny, DecodeAny, FiniteAmax,
                             HasNan,         MatmulW8,  MatmulX8W8};

}  // namespace

const KernelTable* Avx2Kernels() { return &kTable; }

}  // namespace engine::fp8
