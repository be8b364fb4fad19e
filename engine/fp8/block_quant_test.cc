// Block scaling: scales per block from the block's own amax, ragged edges, the edge rules
// (zeros, tiny blocks, inf, NaN), statistics, and the same bytes on every CPU path.
#include "engine/fp8/block_quant.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/fp8/fp8_format.h"
#include "engine/fp8/testing/fp8_reference.h"

namespace engine::fp8 {
namespace {

using testing::Gaussian;

// Largest finite |x| over rows [r0, r1) and cols [c0, c1).
float Amax(const std::vector<float>& x, int cols, int r0, int r1, int c0, int c1) {
  float a = 0;
  for (int r = r0; r < r1; ++r) {
    for (int c = c0; c < c1; ++c) {
      const float v = std::fabs(x[static_cast<size_t>(r) * cols + c]);
      if (std::isfinite(v)) a = std::max(a, v);
    }
  }
  return a;
}

TEST(BlockQuantTest, WeightsGetOneScalePerRaggedBlock) {
  constexpr int kRows = 300, kCols = 200;  // blocks of 128, 128, 44 rows × 128, 72 cols
  std::vector<float> w = Gaussian(kRows * kCols, 1, 0.02f);
  w[5 * kCols + 130] = 3.0f;  // an outlier in block (0, 1) only
  Fp8Matrix q;
  auto stats = QuantizeWeights(w.data(), kRows, kCols, Format::kE4M3, &q);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(q.RowBlocks(), 3);
  ASSERT_EQ(q.ColBlocks(), 2);
  ASSERT_EQ(q.scales.size(), 6u);
  for (int rb = 0; rb < 3; ++rb) {
    for (int cb = 0; cb < 2; ++cb) {
      const float amax = Amax(w, kCols, rb * 128, std::min(kRows, rb * 128 + 128), cb * 128,
                              std::min(kCols, cb * 128 + 128));
      EXPECT_EQ(q.scales[rb * 2 + cb], amax / 448.0f) << rb << "," << cb;
    }
  }
  EXPECT_EQ(q.scales[1], 3.0f / 448.0f);
  EXPECT_LT(q.scales[0], q.scales[1] / 10);  // the outlier's block alone pays for it
  EXPECT_EQ(stats.value().amax, 3.0f);
  EXPECT_EQ(stats.value().elements, kRows * kCols);
  EXPECT_EQ(stats.value().saturated, 0);
  EXPECT_EQ(stats.value().scale_max, 3.0f / 448.0f);

  // Dequantised = Decode(code) · scale, within half an E4M3 ulp (2^-4 relative) of the input,
  // or half the smallest subnormal step (2^-10 · scale) near zero.
  std::vector<float> back(w.size());
  Dequantize(q, back.data());
  double rel_l2_num = 0, rel_l2_den = 0;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const size_t i = static_cast<size_t>(r) * kCols + c;
      const float s = q.Scale(r, c);
      ASSERT_EQ(back[i], DecodeScalar(Format::kE4M3, q.codes[i]) * s);
      const float bound = std::max(std::fabs(w[i]) * 0x1p-4f, s * 0x1p-10f) * 1.0001f;
      ASSERT_LE(std::fabs(back[i] - w[i]), bound) << r << "," << c;
      rel_l2_num += (back[i] - w[i]) * (back[i] - w[i]);
      rel_l2_den += w[i] * w[i];
    }
  }
  const double rel_l2 = std::sqrt(rel_l2_num / rel_l2_den);
  std::printf("E4M3 128x128 round trip, Gaussian weights: relative L2 error %.4f\n", rel_l2);
  EXPECT_LT(rel_l2, 0.04);
}

TEST(BlockQuantTest, ActivationTilesScaleEachRowAlone) {
  constexpr int kRows = 5, kCols = 300;
  std::vector<float> x = Gaussian(kRows * kCols, 2);
  for (int c = 0; c < kCols; ++c) x[2 * kCols + c] *= 1000.0f;  // one loud token
  Fp8Matrix q;
  ASSERT_TRUE(QuantizeActivations(x.data(), kRows, kCols, Format::kE4M3, &q).ok());
  ASSERT_EQ(q.block_rows, 1);
  ASSERT_EQ(q.scales.size(), static_cast<size_t>(kRows * 3));
  for (int r = 0; r < kRows; ++r) {
    for (int cb = 0; cb < 3; ++cb) {
      const float amax = Amax(x, kCols, r, r + 1, cb * 128, std::min(kCols, cb * 128 + 128));
      EXPECT_EQ(q.scales[r * 3 + cb], amax / 448.0f);
    }
  }
  EXPECT_GT(q.scales[2 * 3], 100 * q.scales[1 * 3]);
}

TEST(BlockQuantTest, EdgeRules) {
  EXPECT_EQ(BlockScale(Format::kE4M3, 0.0f), 1.0f);
  EXPECT_EQ(BlockScale(Format::kE5M2, 57344.0f), 1.0f);
  EXPECT_EQ(BlockScale(Format::kE4M3, 1e-40f), FLT_MIN);
  EXPECT_EQ(BlockScale(Format::kE4M3, std::numeric_limits<float>::quiet_NaN()), 1.0f);

  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: zeros (scale 1, all codes 0). Row 1: tiny values. Row 2: a big value, a value that
  // underflows next to it, inf and NaN.
  std::vector<float> x(3 * 4, 0.0f);
  x[4] = 1e-39f;
  x[5] = -2e-39f;
  x[8] = 448.0f;
  x[9] = 1e-4f;
  x[10] = -inf;
  x[11] = nan;
  Fp8Matrix q;
  auto stats = QuantizeActivations(x.data(), 3, 4, Format::kE4M3, &q);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(q.scales[0], 1.0f);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(q.codes[c], 0);
  EXPECT_EQ(q.scales[1], FLT_MIN);
  EXPECT_EQ(q.scales[2], 1.0f);  // amax 448 (inf and NaN do not count)
  EXPECT_EQ(q.codes[10], 0xfe);  // -inf → -448
  EXPECT_EQ(q.codes[11], 0x7f);
  EXPECT_EQ(stats.value().amax, 448.0f);
  EXPECT_EQ(stats.value().saturated, 1);
  EXPECT_EQ(stats.value().underflowed, 1);
  EXPECT_EQ(stats.value().nan, 1);
  EXPECT_EQ(stats.value().scale_min, FLT_MIN);
  std::vector<float> back(x.size());
  Dequantize(q, back.data());
  EXPECT_EQ(back[10], -448.0f);
  EXPECT_TRUE(std::isnan(back[11]));
  // The tiny row keeps its values to within the format's precision.
  EXPECT_NEAR(back[4], 1e-39f, 1e-39f * 0.07f);
}

TEST(BlockQuantTest, RejectsBadShapes) {
  float x = 1.0f;
  Fp8Matrix q;
  EXPECT_EQ(QuantizeWeights(&x, 0, 1, Format::kE4M3, &q).status().code(),
            common::Code::kInvalidArgument);
  EXPECT_EQ(QuantizeBlocks(&x, 1, 1, 0, Format::kE4M3, &q).status().code(),
            common::Code::kInvalidArgument);
}

TEST(BlockQuantTest, StatsMerge) {
  Fp8Stats a, b;
  a.elements = 10;
  a.amax = 2;
  a.scale_min = 0.1f;
  a.scale_max = 0.2f;
  a.saturated = 1;
  b.elements = 5;
  b.amax = 3;
  b.scale_min = 0.05f;
  b.scale_max = 0.15f;
  b.underflowed = 4;
  Fp8Stats m;
  m.Merge(a);
  m.Merge(b);
  EXPECT_EQ(m.elements, 15);
  EXPECT_EQ(m.amax, 3);
  EXPECT_EQ(m.scale_min, 0.05f);
  EXPECT_EQ(m.scale_max, 0.2f);
  EXPECT_EQ(m.saturated, 1);
  EXPECT_EQ(m.underflowed, 4);
}

TEST(BlockQuantTest, EveryPathWritesTheSameBytes) {
  constexpr int kRows = 131, kCols = 257;
  std::vector<float> w = Gaussian(kRows * kCols, 3);
  w[7] = std::numeric_limits<float>::infinity();
  w[1000] = 1e-9f;
  for (Format f : {Format::kE4M3, Format::kE5M2}) {
    Fp8Matrix ref;
    auto ref_stats = QuantizeWeights(w.data(), kRows, kCols, f, &ref, cpu::CpuPath::kScalar);
    ASSERT_TRUE(ref_stats.ok());
    std::vector<float> ref_back(w.size());
    Dequantize(ref, ref_back.data(), cpu::CpuPath::kScalar);
    for (cpu::CpuPath p : cpu::SupportedCpuPaths()) {
      Fp8Matrix q;
      auto stats = QuantizeWeights(w.data(), kRows, kCols, f, &q, p);
      ASSERT_TRUE(stats.ok());
      EXPECT_EQ(q.codes, ref.codes) << cpu::CpuPathName(p);
      EXPECT_EQ(q.scales, ref.scales) << cpu::CpuPathName(p);
      EXPECT_EQ(stats.value().saturated, ref_stats.value().saturated);
      EXPECT_EQ(stats.value().underflowed, ref_stats.value().underflowed);
      std::vector<float> back(w.size());
      Dequantize(q, back.data(), p);
      EXPECT_EQ(back, ref_back) << cpu::CpuPathName(p);
    }
  }
}

}  // namespace
}  // namespace engine::fp8
