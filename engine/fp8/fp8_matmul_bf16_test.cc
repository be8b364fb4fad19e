// The bf16 weight-only product (WeightOnlyKernel::kBf16Dot, kernels_avx512_bf16.cc), E4M3 and
// E5M2 weights, against a double-accumulated product of x and the dequantised weights, within
// the bound fp8_matmul.h documents: 2^-8 of Σ|x·w| for rounding x · scale to bf16, plus the
// subnormal weights it reads as zero, plus fp32 summation order. Ragged K and N, M = 1..9,
// blocks with zero scale, extreme magnitudes of x and of the scales, every code read through
// the kernel, NaN and infinity codes (the exact kernel runs). Skipped on CPUs without
// AVX512_BF16.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/fp8/fp8_format.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/fp8/testing/fp8_reference.h"

namespace engine::fp8 {
namespace {

using testing::Gaussian;

// Exponent field zero, mantissa not.
bool IsSubnormal(Format f, uint8_t code) {
  const uint8_t exponent = f == Format::kE4M3 ? 0x78 : 0x7c;
  return (code & exponent) == 0 && (code & 0x7f) != 0;
}

// The largest subnormal code's value: 2^-6 · 7/8 (E4M3), 2^-14 · 3/4 (E5M2).
double LargestSubnormal(Format f) {
  return f == Format::kE4M3 ? std::ldexp(7.0 / 8.0, -6) : std::ldexp(3.0 / 4.0, -14);
}

// The codes the product does not decode: NaN (both formats) and E5M2's infinities.
std::vector<uint8_t> SpecialCodes(Format f) {
  if (f == Format::kE4M3) return {0x7f, 0xff};
  return {0x7c, 0x7d, 0x7e, 0x7f, 0xfc, 0xfd, 0xfe, 0xff};
}

// Worst |got - want| over the documented bound, want = Σ x·dequant(w) in double.
double WorstOverBound(const std::vector<float>& got, const std::vector<float>& x,
                      const Fp8Matrix& w, int M) {
  const int N = w.rows, K = w.cols;
  std::vector<float> wd(static_cast<size_t>(N) * K);
  Dequantize(w, wd.data(), cpu::CpuPath::kScalar);
  double worst = 0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double want = 0, mag = 0, sub = 0;
      for (int k = 0; k < K; ++k) {
        const size_t wi = static_cast<size_t>(n) * K + k;
        const double p = static_cast<double>(x[static_cast<size_t>(m) * K + k]) * wd[wi];
        want += p;
        mag += std::fabs(p);
        if (IsSubnormal(w.format, w.codes[wi])) sub += std::fabs(p);
      }
      const double bound = std::ldexp(mag, -8) + sub + 1e-5 * mag + 1e-30;
      const double err = std::fabs(got[static_cast<size_t>(m) * N + n] - want);
      worst = std::max(worst, err / bound);
    }
  }
  return worst;
}

class Bf16DotTest : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (!Bf16DotRuns(GetParam(), cpu::CpuPath::kAvx512)) {
      GTEST_SKIP() << "this CPU lacks AVX512_BF16";
    }
  }
  // w (rows, cols) quantised in 128 × 128 blocks to the format under test.
  static Fp8Matrix Quantized(const std::vector<float>& w, int rows, int cols) {
    Fp8Matrix wq;
    EXPECT_TRUE(QuantizeWeights(w.data(), rows, cols, GetParam(), &wq).ok());
    return wq;
  }
  static std::vector<float> Run(const std::vector<float>& x, int M, const Fp8Matrix& w,
                                WeightOnlyKernel kernel = WeightOnlyKernel::kBf16Dot) {
    std::vector<float> y(static_cast<size_t>(M) * w.rows);
    EXPECT_TRUE(
        MatmulWeightFp8(y.data(), x.data(), M, w, nullptr, cpu::CpuPath::kAvx512, kernel).ok());
    return y;
  }
};

TEST_P(Bf16DotTest, MatchesDequantisedReferenceWithinBound) {
  struct Shape {
    int N, K;
  };
  // The policy's shapes and ragged ones (N, K not multiples of 2, 4, 64 or 128); K past 64
  // blocks (8192), which the product's scales take 64 at a time.
  const Shape shapes[] = {{768, 256}, {256, 1024}, {37, 200}, {130, 129}, {1, 7},
                          {67, 300},  {5, 64},     {3, 65},   {129, 1},   {3, 8300}};
  uint32_t seed = 100;
  for (const Shape& s : shapes) {
    for (int M = 1; M <= 9; ++M) {
      const std::vector<float> x = Gaussian(static_cast<size_t>(M) * s.K, seed++, 1.0f);
      const std::vector<float> w = Gaussian(static_cast<size_t>(s.N) * s.K, seed++, 0.05f);
      const Fp8Matrix wq = Quantized(w, s.N, s.K);
      const double worst = WorstOverBound(Run(x, M, wq), x, wq, M);
      EXPECT_LE(worst, 1.0) << M << "x" << s.N << "x" << s.K;
    }
  }
}

TEST_P(Bf16DotTest, ErrorIsBf16SizedAndBiasIsAdded) {
  // The typical error, not only the bound: relative L2 against the fp32-activation product.
  const int M = 4, N = 1024, K = 256;
  const std::vector<float> x = Gaussian(M * K, 7, 1.0f), w = Gaussian(N * K, 8, 0.05f);
  const std::vector<float> bias = Gaussian(N, 9, 0.1f);
  const Fp8Matrix wq = Quantized(w, N, K);
  std::vector<float> a(M * N), b(M * N);
  ASSERT_TRUE(MatmulWeightFp8(a.data(), x.data(), M, wq, bias.data(), cpu::CpuPath::kAvx512,
                              WeightOnlyKernel::kBf16Dot)
                  .ok());
  ASSERT_TRUE(MatmulWeightFp8(b.data(), x.data(), M, wq, bias.data(), cpu::CpuPath::kAvx512,
                              WeightOnlyKernel::kFp32)
                  .ok());
  double num = 0, den = 0;
  for (int i = 0; i < M * N; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  const double rel = std::sqrt(num / den);
  std::printf("bf16 dot vs fp32 activations, %s 4x1024x256: relative L2 %.2e\n",
              FormatName(GetParam()), rel);
  EXPECT_GT(rel, 0.0);  // x really is rounded
  EXPECT_LT(rel, 3e-3);
}

TEST_P(Bf16DotTest, ExtremeMagnitudesOfXAndScales) {
  // Products of x and scale far outside fp32's range relative to 2^-120 or 2^-112 (the bf16
  // reading of the codes) must neither flush nor overflow: the kernel rescales by powers of two.
  const int N = 40, K = 300;
  const std::vector<float> w = Gaussian(N * K, 31, 1.0f);
  for (float x_mag : {1e-30f, 1e-12f, 1.0f, 1e12f, 1e30f}) {
    for (float w_mag : {1e-25f, 1.0f, 1e20f}) {
      std::vector<float> ws(w);
      for (float& v : ws) v *= w_mag;
      const Fp8Matrix wq = Quantized(ws, N, K);
      for (int M : {1, 3, 8}) {
        std::vector<float> x = Gaussian(static_cast<size_t>(M) * K, 32 + M, 1.0f);
        // One row a thousand times smaller than the others: rows are scaled apart.
        for (float& v : x) v *= x_mag;
        for (int k = 0; k < K; ++k) x[k] *= 1e-3f;
        const double product = static_cast<double>(x_mag) * w_mag;
        if (product * K > 1e37 || product < 1e-30)
          continue;  // the fp32 result itself over/underflows
        EXPECT_LE(WorstOverBound(Run(x, M, wq), x, wq, M), 1.0)
            << "x " << x_mag << " w " << w_mag << " M " << M;
      }
    }
  }
}

TEST_P(Bf16DotTest, SmallXCarriesTheRowBesideAHugeOne) {
  // x[0] is 1e20 and meets zero weights; the rest of the row, 1e-30 of it (2^-100, within the
  // 2^-125 the product keeps), makes the whole result. Products of those elements with the
  // smallest normal codes must stay normal, also in the last of several K-blocks whose scale
  // is far below the row block's largest.
  const int N = 30, K = 400;
  std::vector<float> w = Gaussian(N * K, 81, 1.0f);
  for (int n = 0; n < N; ++n) w[n * K] = 0.0f;
  for (int n = 0; n < N; ++n) {
    for (int k = 3 * kBlock; k < K; ++k) w[n * K + k] *= 1e-6f;  // last K-block: small scale
  }
  const Fp8Matrix wq = Quantized(w, N, K);
  for (int M : {1, 2, 5}) {
    std::vector<float> x = Gaussian(static_cast<size_t>(M) * K, 82 + M, 1e-10f);
    for (int m = 0; m < M; ++m) x[m * K] = 1e20f;
    const std::vector<float> y = Run(x, M, wq);
    EXPECT_LE(WorstOverBound(y, x, wq, M), 1.0) << M;
    for (int i = 0; i < M * N; ++i) EXPECT_NE(y[i], 0.0f) << i;
  }
}

TEST_P(Bf16DotTest, ZeroScaleBlocksAndZeroRows) {
  const int M = 5, N = 200, K = 260;
  std::vector<float> x = Gaussian(M * K, 41, 1.0f);
  for (int k = 0; k < K; ++k) x[2 * K + k] = 0.0f;  // row 2 all zeros
  const std::vector<float> w = Gaussian(N * K, 42, 0.1f);
  Fp8Matrix wq = Quantized(w, N, K);
  // Zero scales in the first row block's middle K-block and the whole last row block.
  wq.scales[1] = 0.0f;
  for (int kb = 0; kb < wq.ColBlocks(); ++kb) wq.scales[wq.ColBlocks() + kb] = 0.0f;
  const std::vector<float> y = Run(x, M, wq);
  EXPECT_LE(WorstOverBound(y, x, wq, M), 1.0);
  for (int n = 0; n < N; ++n) {
    EXPECT_EQ(y[2 * N + n], 0.0f) << n;
    if (n >= 128) {
      EXPECT_EQ(y[n], 0.0f) << n;
    }
  }
}

TEST_P(Bf16DotTest, SubnormalWeightsAreWithinTheirBound) {
  // A block whose largest weight is 1 and the rest just below the format's smallest normal
  // (2^-6 / 448 ≈ 2^-14.8 of the largest in E4M3, 2^-14 / 57344 ≈ 2^-29.8 in E5M2): most codes
  // are subnormals, which the kernel reads as zero. The error stays below the largest
  // subnormal times the block's scale per weight (times |x|), and the bound above holds.
  const Format f = GetParam();
  const int M = 2, N = 8, K = 128;
  const int below = f == Format::kE4M3 ? -15 : -31;
  std::vector<float> w(N * K);
  std::mt19937 rng(51);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : w) {
    const float r = u(rng);
    v = std::copysign(0.3f + 0.7f * std::fabs(r), r) * std::ldexp(1.0f, below);
  }
  for (int n = 0; n < N; ++n) w[n * K] = 1.0f;
  const Fp8Matrix wq = Quantized(w, N, K);
  int subnormal = 0;
  for (uint8_t c : wq.codes) subnormal += IsSubnormal(f, c);
  ASSERT_GT(subnormal, N * K / 2);
  const std::vector<float> x = Gaussian(M * K, 52, 1.0f);
  const std::vector<float> y = Run(x, M, wq);
  EXPECT_LE(WorstOverBound(y, x, wq, M), 1.0);
  std::vector<float> wd(N * K);
  Dequantize(wq, wd.data(), cpu::CpuPath::kScalar);
  const double per_weight = LargestSubnormal(f) * wq.scales[0];
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double want = 0, sum_x = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        want += static_cast<double>(x[m * K + k]) * wd[n * K + k];
        mag += std::fabs(static_cast<double>(x[m * K + k]) * wd[n * K + k]);
        sum_x += std::fabs(x[m * K + k]);
      }
      EXPECT_LE(std::fabs(y[m * N + n] - want), per_weight * sum_x + std::ldexp(mag, -8));
    }
  }
}

TEST_P(Bf16DotTest, EveryCodeReadsAsItsValueThroughTheKernel) {
  // Every code but the special ones, twice (once at an even, once at an odd position along K,
  // where the kernel reads it from the word's low and high byte), picked out by one-hot rows
  // of x: y[m][j] is exactly one weight times 1. Normal codes must give their value times the
  // block's scale exactly, subnormal codes 0. Two K-blocks with different scales.
  const Format f = GetParam();
  const std::vector<uint8_t> special = SpecialCodes(f);
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c) {
    if (std::find(special.begin(), special.end(), c) == special.end()) codes.push_back(c);
  }
  const int K = static_cast<int>(codes.size()), M = K;
  Fp8Matrix wq;
  wq.format = f;
  wq.rows = 2;
  wq.cols = K;
  wq.codes.resize(2 * K);
  for (int k = 0; k < K; ++k) {
    wq.codes[k] = codes[k];
    wq.codes[K + k] = codes[(k + 1) % K];
  }
  wq.scales = {3.0f, 0.75f};
  ASSERT_EQ(wq.scales.size(), static_cast<size_t>(wq.ColBlocks()));
  std::vector<float> x(static_cast<size_t>(M) * K, 0.0f);
  for (int m = 0; m < M; ++m) x[static_cast<size_t>(m) * K + m] = 1.0f;
  const std::vector<float> y = Run(x, M, wq);
  int normal = 0;
  for (int m = 0; m < M; ++m) {
    for (int j = 0; j < 2; ++j) {
      const uint8_t c = wq.codes[j * K + m];
      const double scale = m < kBlock ? 3.0 : 0.75;
      const double want = IsSubnormal(f, c) ? 0.0 : testing::ReferenceValue(f, c) * scale;
      normal += !IsSubnormal(f, c) && (c & 0x7f) != 0;
      EXPECT_EQ(y[m * 2 + j], want) << "code 0x" << std::hex << int{c};
    }
  }
  EXPECT_EQ(normal, 2 * (f == Format::kE4M3 ? 254 - 2 - 14 : 248 - 2 - 6));
}

TEST_P(Bf16DotTest, Bf16ReadingOfEveryCodeInEitherByte) {
  // The shift and mask on their own, on every 16-bit word: the code in the high byte, >> s
  // (arithmetic) & mask; the code in the low byte, << 8 first. Each gives a bf16 of the code's
  // value · 2^-gap exactly, subnormal codes included (as bf16 subnormals), whatever the other
  // byte holds. E4M3: s 4, mask 0x87F0, gap 120; E5M2: s 3, mask 0x8FE0, gap 112.
  const Format f = GetParam();
  const int s = f == Format::kE4M3 ? 4 : 3, gap = f == Format::kE4M3 ? 120 : 112;
  const uint16_t mask = f == Format::kE4M3 ? 0x87F0 : 0x8FE0;
  const std::vector<uint8_t> special = SpecialCodes(f);
  const auto bf16 = [](int word) {
    const uint32_t bits = static_cast<uint32_t>(word & 0xffff) << 16;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return static_cast<double>(v);
  };
  int checked = 0;
  for (int word = 0; word < 65536; ++word) {
    const auto hi = static_cast<uint8_t>(word >> 8), lo = static_cast<uint8_t>(word);
    const int high_read = (static_cast<int16_t>(word) >> s) & mask;
    const int low_read = (static_cast<int16_t>(word << 8) >> s) & mask;
    for (const auto& [code, read] : {std::pair{hi, high_read}, std::pair{lo, low_read}}) {
      if (std::find(special.begin(), special.end(), code) != special.end()) continue;
      ASSERT_EQ(std::ldexp(bf16(read), gap), testing::ReferenceValue(f, code))
          << "word 0x" << std::hex << word;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 256 * (256 - static_cast<int>(special.size())));
}

TEST_P(Bf16DotTest, SpecialCodesRunTheExactKernel) {
  // NaN codes and E5M2's infinities, one at a time, in the first 64-chunk of a row of the first
  // row block or in the ragged last chunk of a row of the last: the result is the fp32 kernel's,
  // bit for bit, with the code's row NaN or ±inf and every other row finite.
  const Format f = GetParam();
  const int N = 140, K = 140;
  const std::vector<float> w = Gaussian(N * K, 62, 1.0f);
  const Fp8Matrix clean = Quantized(w, N, K);
  const auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  for (uint8_t code : SpecialCodes(f)) {
    const bool inf = f == Format::kE5M2 && (code & 0x7f) == 0x7c;
    for (const auto& [row, col] : {std::pair{1, 5}, std::pair{135, 131}}) {
      Fp8Matrix wq = clean;
      wq.codes[row * K + col] = code;
      for (int M : {1, 3, 6}) {
        const std::vector<float> x = Gaussian(static_cast<size_t>(M) * K, 61 + M, 1.0f);
        const std::vector<float> exact = Run(x, M, wq, WeightOnlyKernel::kFp32);
        for (WeightOnlyKernel kernel : {WeightOnlyKernel::kBf16Dot, WeightOnlyKernel::kFastest}) {
          const std::vector<float> y = Run(x, M, wq, kernel);
          EXPECT_EQ(bits(y), bits(exact)) << "code 0x" << std::hex << int{code};
          for (int m = 0; m < M; ++m) {
            for (int n = 0; n < N; ++n) {
              const float v = y[m * N + n];
              if (n != row) {
                EXPECT_TRUE(std::isfinite(v)) << m << "," << n;
              } else {
                EXPECT_TRUE(inf ? std::isinf(v) : std::isnan(v)) << int{code} << " " << m;
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(Bf16DotTest, FastestIsBf16WhereItRunsAndRefusalsElsewhere) {
  const Format f = GetParam();
  const int M = 2, N = 50, K = 130;
  const std::vector<float> x = Gaussian(M * K, 71, 1.0f), w = Gaussian(N * K, 72, 0.1f);
  const Fp8Matrix wq = Quantized(w, N, K);
  EXPECT_EQ(Run(x, M, wq, WeightOnlyKernel::kFastest), Run(x, M, wq, WeightOnlyKernel::kBf16Dot));
  EXPECT_NE(Run(x, M, wq, WeightOnlyKernel::kFastest), Run(x, M, wq, WeightOnlyKernel::kFp32));
  std::vector<float> y(M * N);
  for (cpu::CpuPath p : {cpu::CpuPath::kScalar, cpu::CpuPath::kAvx2}) {
    if (!cpu::CpuSupports(p)) continue;
    EXPECT_FALSE(Bf16DotRuns(f, p));
    EXPECT_EQ(
        MatmulWeightFp8(y.data(), x.data(), M, wq, nullptr, p, WeightOnlyKernel::kBf16Dot).code(),
        common::Code::kFailedPrecondition);
    // kFastest there is the exact product.
    std::vector<float> exact(M * N);
    ASSERT_TRUE(
        MatmulWeightFp8(exact.data(), x.data(), M, wq, nullptr, p, WeightOnlyKernel::kFp32).ok());
    ASSERT_TRUE(
        MatmulWeightFp8(y.data(), x.data(), M, wq, nullptr, p, WeightOnlyKernel::kFastest).ok());
    EXPECT_EQ(y, exact);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Bf16DotTest, ::testing::Values(Format::kE4M3, Format::kE5M2),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(FormatName(info.param));
                         });

}  // namespace
}  // namespace engine::fp8
