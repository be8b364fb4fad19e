// FP8 matmuls on every CPU path: against a double-accumulated product of the dequantised
// operands (tight: only fp32 summation order differs), and against the product of the original
// fp32 operands (the quantisation error itself, bounded and reported).
#include "engine/fp8/fp8_matmul.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/fp8/testing/fp8_reference.h"

namespace engine::fp8 {
namespace {

using testing::ReferenceMatmul;

using testing::Gaussian;

std::vector<float> Dequantized(const Fp8Matrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows) * m.cols);
  Dequantize(m, out.data(), cpu::CpuPath::kScalar);
  return out;
}

// Worst |got - want| over the row's scale sum Σ|x||w| (the bound fp32 reordering obeys).
double WorstOrderError(const std::vector<float>& got, const std::vector<float>& want,
                       const std::vector<float>& x, const std::vector<float>& w, int M, int N,
                       int K) {
  double worst = 0;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double mag = 0;
      for (int k = 0; k < K; ++k) {
        mag += std::fabs(static_cast<double>(x[static_cast<size_t>(m) * K + k]) *
                         w[static_cast<size_t>(n) * K + k]);
      }
      const size_t i = static_cast<size_t>(m) * N + n;
      worst = std::max(worst, std::fabs(got[i] - want[i]) / std::max(mag, 1e-30));
    }
  }
  return worst;
}

double RelativeL2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

struct Shape {
  int M, N, K;
};

class Fp8MatmulTest : public ::testing::TestWithParam<cpu::CpuPath> {};

TEST_P(Fp8MatmulTest, WeightOnlyMatchesDequantisedReference) {
  const cpu::CpuPath path = GetParam();
  // Batch 1..8 at the policy's shapes, plus ragged ones (N, K not multiples of 4, 16, 128).
  const Shape shapes[] = {{1, 768, 256}, {4, 1024, 256}, {8, 256, 1024}, {3, 37, 200},
                          {5, 130, 129}, {2, 1, 7},      {9, 67, 300}};
  for (const Shape& s : shapes) {
    const std::vector<float> x = Gaussian(static_cast<size_t>(s.M) * s.K, 11, 1.0f);
    const std::vector<float> w = Gaussian(static_cast<size_t>(s.N) * s.K, 12, 0.05f);
    std::vector<float> bias = Gaussian(s.N, 13, 0.1f);
    for (Format f : {Format::kE4M3, Format::kE5M2}) {
      Fp8Matrix wq;
      ASSERT_TRUE(QuantizeWeights(w.data(), s.N, s.K, f, &wq, cpu::CpuPath::kScalar).ok());
      std::vector<float> y(static_cast<size_t>(s.M) * s.N);
      ASSERT_TRUE(MatmulWeightFp8(y.data(), x.data(), s.M, wq, bias.data(), path,
                                  WeightOnlyKernel::kFp32)
                      .ok());
      std::vector<float> want = ReferenceMatmul(x, Dequantized(wq), s.M, s.N, s.K);
      for (int m = 0; m < s.M; ++m) {
        for (int n = 0; n < s.N; ++n) want[static_cast<size_t>(m) * s.N + n] += bias[n];
      }
      const double order = WorstOrderError(y, want, x, Dequantized(wq), s.M, s.N, s.K);
      EXPECT_LT(order, 1e-5) << cpu::CpuPathName(path) << " " << s.M << "x" << s.N << "x" << s.K;
      if (f == Format::kE4M3 && s.M == 4 && s.N == 1024) {
        std::vector<float> exact = ReferenceMatmul(x, w, s.M, s.N, s.K);
        for (int m = 0; m < s.M; ++m) {
          for (int n = 0; n < s.N; ++n) exact[static_cast<size_t>(m) * s.N + n] += bias[n];
        }
        const double rel = RelativeL2(y, exact);
        std::printf("%s weight-only E4M3 4x1024x256: relative L2 vs fp32 operands %.4f\n",
                    cpu::CpuPathName(path), rel);
        EXPECT_LT(rel, 0.05);
      }
    }
  }
}

TEST_P(Fp8MatmulTest, Fp8TimesFp8MatchesDequantisedReference) {
  const cpu::CpuPath path = GetParam();
  const Shape shapes[] = {{64, 768, 256}, {37, 130, 300}, {4, 64, 128},
                          {5, 1, 1},      {130, 70, 129}, {13, 256, 1024}};
  for (const Shape& s : shapes) {
    const std::vector<float> x = Gaussian(static_cast<size_t>(s.M) * s.K, 21, 1.0f);
    const std::vector<float> w = Gaussian(static_cast<size_t>(s.N) * s.K, 22, 0.05f);
    Fp8Matrix xq, wq;
    ASSERT_TRUE(QuantizeActivations(x.data(), s.M, s.K, Format::kE4M3, &xq).ok());
    ASSERT_TRUE(QuantizeWeights(w.data(), s.N, s.K, Format::kE4M3, &wq).ok());
    std::vector<float> y(static_cast<size_t>(s.M) * s.N);
    ASSERT_TRUE(MatmulFp8(y.data(), xq, wq, nullptr, path).ok());
    const std::vector<float> xd = Dequantized(xq), wd = Dequantized(wq);
    const std::vector<float> want = ReferenceMatmul(xd, wd, s.M, s.N, s.K);
    EXPECT_LT(WorstOrderError(y, want, xd, wd, s.M, s.N, s.K), 1e-5)
        << cpu::CpuPathName(path) << " " << s.M << "x" << s.N << "x" << s.K;
    if (s.M == 64) {
      const double rel = RelativeL2(y, ReferenceMatmul(x, w, s.M, s.N, s.K));
      std::printf("%s fp8 x fp8 E4M3 64x768x256: relative L2 vs fp32 operands %.4f\n",
                  cpu::CpuPathName(path), rel);
      EXPECT_LT(rel, 0.06);
    }
  }
}

TEST_P(Fp8MatmulTest, MixedFormatsAndBias) {
  // E4M3 activations × E5M2 weights (the mix a backward pass uses), with a bias.
  const cpu::CpuPath path = GetParam();
  const int M = 9, N = 33, K = 260;
  const std::vector<float> x = Gaussian(M * K, 31, 1.0f), w = Gaussian(N * K, 32, 0.1f);
  const std::vector<float> bias = Gaussian(N, 33, 1.0f);
  Fp8Matrix xq, wq;
  ASSERT_TRUE(QuantizeActivations(x.data(), M, K, Format::kE4M3, &xq).ok());
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE5M2, &wq).ok());
  std::vector<float> y(M * N);
  ASSERT_TRUE(MatmulFp8(y.data(), xq, wq, bias.data(), path).ok());
  const std::vector<float> xd = Dequantized(xq), wd = Dequantized(wq);
  std::vector<float> want = ReferenceMatmul(xd, wd, M, N, K);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) want[m * N + n] += bias[n];
  }
  EXPECT_LT(WorstOrderError(y, want, xd, wd, M, N, K), 1e-5);
}

TEST_P(Fp8MatmulTest, NanWeightsPropagate) {
  const cpu::CpuPath path = GetParam();
  const int M = 3, N = 6, K = 40;
  const std::vector<float> x = Gaussian(M * K, 41, 1.0f);
  std::vector<float> w = Gaussian(N * K, 42, 1.0f);
  w[2 * K + 17] = std::numeric_limits<float>::quiet_NaN();  // row 2 only
  Fp8Matrix wq;
  ASSERT_TRUE(QuantizeWeights(w.data(), N, K, Format::kE4M3, &wq).ok());
  std::vector<float> y(M * N);
  ASSERT_TRUE(MatmulWeightFp8(y.data(), x.data(), M, wq, nullptr, path).ok());
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) EXPECT_EQ(std::isnan(y[m * N + n]), n == 2) << m << "," << n;
  }
  Fp8Matrix xq;
  ASSERT_TRUE(QuantizeActivations(x.data(), M, K, Format::kE4M3, &xq).ok());
  ASSERT_TRUE(MatmulFp8(y.data(), xq, wq, nullptr, path).ok());
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) EXPECT_EQ(std::isnan(y[m * N + n]), n == 2) << m << "," << n;
  }
}

TEST_P(Fp8MatmulTest, RejectsMismatchedOperands) {
  const cpu::CpuPath path = GetParam();
  const std::vector<float> a = Gaussian(4 * 16, 51, 1.0f), b = Gaussian(4 * 17, 52, 1.0f);
  Fp8Matrix xq, wq;
  ASSERT_TRUE(QuantizeActivations(a.data(), 4, 16, Format::kE4M3, &xq).ok());
  ASSERT_TRUE(QuantizeWeights(b.data(), 4, 17, Format::kE4M3, &wq).ok());
  std::vector<float> y(16);
  EXPECT_EQ(MatmulFp8(y.data(), xq, wq, nullptr, path).code(), common::Code::kInvalidArgument);
  EXPECT_EQ(MatmulWeightFp8(y.data(), a.data(), 0, wq, nullptr, path).code(),
            common::Code::kInvalidArgument);
  wq.scales.pop_back();
  EXPECT_EQ(MatmulWeightFp8(y.data(), a.data(), 4, wq, nullptr, path).code(),
            common::Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Paths, Fp8MatmulTest, ::testing::ValuesIn(cpu::SupportedCpuPaths()),
                         [](const auto& info) { return testing::PathTestName(info.param); });

}  // namespace
}  // namespace engine::fp8
