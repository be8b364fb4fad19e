// The bf16 weight-only product (WeightOnlyKernel::kBf16Dot, kernels_avx512_bf16.cc) against a
// double-accumulated product of x and the dequantised weights, within the bound fp8_matmul.h
// documents: 2^-8 of Σ|x·w| for rounding x · scale to bf16, plus the E4M3 subnormal weights it
// reads as zero, plus fp32 summation order. Ragged K and N, M = 1..9, blocks with zero scale,
// extreme magnitudes of x and of the scales, NaN codes. Skipped on CPUs without AVX512_BF16.
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/fp8/fp8_matmul.h"

namespace engine::fp8 {
namespace {

std::vector<float> Gaussian(size_t n, uint32_t seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool IsE4M3Subnormal(uint8_t code) { return (code & 0x78) == 0 && (code & 0x07) != 0; }

// Worst |got - want| over the documented bound, want = Σ x·dequant(w) in double.
double WorstOverBound(const std::vector<float>& got, const std::vector<float>& x,
                      const Fp8Matrix& w, int M) {
  const int N = w.rows, K = w.cols;
  std::vector<float> wd(static_cast<size_t>(N) * K);
  Dequantize(w, wd.data(), CpuPath::kScalar);
  double worst = 0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double want = 0, mag = 0, sub = 0;
      for (int k = 0; k < K; ++k) {
        const size_t wi = static_cast<size_t>(n) * K + k;
        const double p = static_cast<double>(x[static_cast<size_t>(m) * K + k]) * wd[wi];
        want += p;
        mag += std::fabs(p);
        if (IsE4M3Subnormal(w.codes[wi])) sub += std::fabs(p);
      }
      const double bound = std::ldexp(mag, -8) + sub + 1e-5 * mag + 1e-30;
      const double err = std::fabs(got[static_cast<size_t>(m) * N + n] - want);
      worst = std::max(worst, err / bound);
    }
  }
  return worst;
}

class Bf16DotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Bf16DotRuns(Format::kE4M3, CpuPath::kAvx512)) {
      GTEST_SKIP() << "this CPU lacks AVX512_BF16";
    }
  }
  static std::vector<float> Run(const std::vector<float>& x, int M, const Fp8Matrix& w,
                                WeightOnlyKernel kernel = WeightOnlyKernel::kBf16Dot) {
    std::vector<float> y(static_cast<size_t>(M) * w.rows);
    EXPECT_TRUE(MatmulWeightFp8(y.data(), x.data(), M, w, nullptr, CpuPath::kAvx512, kernel).ok());
    return y;
  }
};

TEST_F(Bf16DotTest, MatchesDequantisedReferenceWithinBound) {
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
      Fp8Matrix wq;
      ASSERT_TRUE(QuantizeWeights(w.data(), s.N, s.K, Format::kE4M3, &wq).ok());
      const double worst = WorstOverBound(Run(x, M, wq), x, wq, M);
      EXPECT_LE(worst, 1.0) << M << "x" << s.N << "x" << s.K;
    }
  }
}

TEST_F(Bf16DotTest, ErrorIsBf16SizedAndBiasIsAdded) {
  // The typical error, not only the bound: relative L2 against the fp32-activation product.
  const int M = 4, N = 1024, K = 256;
  const std::vector<float> x = Gaussian(M * K, 7, 1.0f), w = Gaussian(N * K, 8, 0.05f);
  const std::vector<float> bias = Gaussian(N, 9, 0.1f);
  Fp8Matrix wq;
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE4M3, &wq).ok());
  std::vector<float> a(M * N), b(M * N);
  ASSERT_TRUE(MatmulWeightFp8(a.data(), x.data(), M, wq, bias.data(), CpuPath::kAvx512,
                              WeightOnlyKernel::kBf16Dot)
                  .ok());
  ASSERT_TRUE(MatmulWeightFp8(b.data(), x.data(), M, wq, bias.data(), CpuPath::kAvx512,
                              WeightOnlyKernel::kFp32)
                  .ok());
  double num = 0, den = 0;
  for (int i = 0; i < M * N; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  const double rel = std::sqrt(num / den);
  std::printf("bf16 dot vs fp32 activations, E4M3 4x1024x256: relative L2 %.2e\n", rel);
  EXPECT_GT(rel, 0.0);  // x really is rounded
  EXPECT_LT(rel, 3e-3);
}

TEST_F(Bf16DotTest, ExtremeMagnitudesOfXAndScales) {
  // Products of x and scale far outside [2^-126, 2^128] relative to 2^-120 (the bf16 reading of
  // the codes) must neither flush nor overflow: the kernel rescales by powers of two.
  const int N = 40, K = 300;
  const std::vector<float> w = Gaussian(N * K, 31, 1.0f);
  for (float x_mag : {1e-30f, 1e-12f, 1.0f, 1e12f, 1e30f}) {
    for (float w_mag : {1e-25f, 1.0f, 1e20f}) {
      std::vector<float> ws(w);
      for (float& v : ws) v *= w_mag;
      Fp8Matrix wq;
      ASSERT_TRUE(QuantizeWeights(ws.data(), N, K, Format::kE4M3, &wq).ok());
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

TEST_F(Bf16DotTest, ZeroScaleBlocksAndZeroRows) {
  const int M = 5, N = 200, K = 260;
  std::vector<float> x = Gaussian(M * K, 41, 1.0f);
  for (int k = 0; k < K; ++k) x[2 * K + k] = 0.0f;  // row 2 all zeros
  const std::vector<float> w = Gaussian(N * K, 42, 0.1f);
  Fp8Matrix wq;
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE4M3, &wq).ok());
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

TEST_F(Bf16DotTest, SubnormalWeightsAreWithinTheirBound) {
  // A block whose largest weight is 1 and the rest 2^-17..2^-15 of it: most codes are E4M3
  // subnormals, which the kernel reads as zero. The error stays below 2^-6 · 7/8 of the block's
  // scale per weight (times |x|), and the bound above holds.
  const int M = 2, N = 8, K = 128;
  std::vector<float> w(N * K);
  std::mt19937 rng(51);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : w) {
    const float r = u(rng);
    v = std::copysign(0.3f + 0.7f * std::fabs(r), r) * std::ldexp(1.0f, -15);
  }
  for (int n = 0; n < N; ++n) w[n * K] = 1.0f;
  Fp8Matrix wq;
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE4M3, &wq).ok());
  int subnormal = 0;
  for (uint8_t c : wq.codes) subnormal += IsE4M3Subnormal(c);
  ASSERT_GT(subnormal, N * K / 2);
  const std::vector<float> x = Gaussian(M * K, 52, 1.0f);
  const std::vector<float> y = Run(x, M, wq);
  EXPECT_LE(WorstOverBound(y, x, wq, M), 1.0);
  std::vector<float> wd(N * K);
  Dequantize(wq, wd.data(), CpuPath::kScalar);
  const double per_weight = std::ldexp(wq.scales[0], -6) * 7.0 / 8.0;
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

TEST_F(Bf16DotTest, NanCodesPropagateThroughTheExactKernel) {
  const int M = 3, N = 6, K = 140;
  const std::vector<float> x = Gaussian(M * K, 61, 1.0f);
  std::vector<float> w = Gaussian(N * K, 62, 1.0f);
  w[4 * K + 131] = std::numeric_limits<float>::quiet_NaN();  // row 4, in the ragged last chunk
  w[1 * K + 5] = -std::numeric_limits<float>::quiet_NaN();   // row 1, code 0xff
  Fp8Matrix wq;
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE4M3, &wq).ok());
  ASSERT_EQ(wq.codes[4 * K + 131], 0x7f);
  ASSERT_EQ(wq.codes[1 * K + 5], 0xff);
  for (WeightOnlyKernel kernel : {WeightOnlyKernel::kBf16Dot, WeightOnlyKernel::kFastest}) {
    const std::vector<float> y = Run(x, M, wq, kernel);
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        EXPECT_EQ(std::isnan(y[m * N + n]), n == 1 || n == 4) << m << "," << n;
      }
    }
  }
}

TEST_F(Bf16DotTest, FastestIsBf16WhereItRunsAndRefusalsElsewhere) {
  const int M = 2, N = 50, K = 130;
  const std::vector<float> x = Gaussian(M * K, 71, 1.0f), w = Gaussian(N * K, 72, 0.1f);
  Fp8Matrix wq, w5;
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE4M3, &wq).ok());
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE5M2, &w5).ok());
  EXPECT_EQ(Run(x, M, wq, WeightOnlyKernel::kFastest), Run(x, M, wq, WeightOnlyKernel::kBf16Dot));
  EXPECT_NE(Run(x, M, wq, WeightOnlyKernel::kFastest), Run(x, M, wq, WeightOnlyKernel::kFp32));
  std::vector<float> y(M * N);
  EXPECT_EQ(MatmulWeightFp8(y.data(), x.data(), M, w5, nullptr, CpuPath::kAvx512,
                            WeightOnlyKernel::kBf16Dot)
                .code(),
            common::Code::kFailedPrecondition);
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2}) {
    if (!CpuSupports(p)) continue;
    EXPECT_FALSE(Bf16DotRuns(Format::kE4M3, p));
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

}  // namespace
}  // namespace engine::fp8
