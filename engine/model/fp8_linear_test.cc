// The FP8-compute Linear (fp8_linear.h) against the fp32 Linear of layers.h on fresh random
// inputs of ragged shapes: every product within the error FP8 rounding allows, each product
// equal (up to summation order) to one of the dequantised operands in the formats the recipe
// names (so a test fails if dY were E4M3 or X were not quantised), and delayed scaling's history
// and saturation counts.
#include "engine/model/fp8_linear.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "engine/fp8/block_quant.h"
#include "engine/model/layers.h"
#include "engine/testing/random_vectors.h"

namespace engine {
namespace {

using fp8::Format;

using testing::Random;

double RelL2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> Dequant(const float* x, int rows, int cols, int block_rows, Format f) {
  fp8::Fp8Matrix m;
  EXPECT_TRUE(fp8::QuantizeBlocks(x, rows, cols, block_rows, f, &m).ok());
  std::vector<float> out(static_cast<size_t>(rows) * cols);
  fp8::Dequantize(m, out.data());
  return out;
}

std::vector<float> Transposed(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> t(x.size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c)
      t[static_cast<size_t>(c) * rows + r] = x[static_cast<size_t>(r) * cols + c];
  }
  return t;
}

// y (M, N) = a (M, K) · b (N, K)ᵀ in double.
std::vector<float> Product(const std::vector<float>& a, const std::vector<float>& b, int M, int N,
                           int K) {
  std::vector<float> y(static_cast<size_t>(M) * N);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int k = 0; k < K; ++k) acc += static_cast<double>(a[m * K + k]) * b[n * K + k];
      y[static_cast<size_t>(m) * N + n] = static_cast<float>(acc);
    }
  }
  return y;
}

struct Case {
  int B, C, OC;
};

class Fp8LinearTest : public ::testing::TestWithParam<Case> {};

// Forward and backward against fp32, and each product against the product of the operands
// dequantised in the recipe's formats and layouts.
TEST_P(Fp8LinearTest, MatchesFp32WithinFp8ErrorAndUsesTheRecipesFormats) {
  const auto [B, C, OC] = GetParam();
  common::Rng rng(B * 7 + C);
  const auto x = Random(rng, static_cast<size_t>(B) * C);
  const auto w = Random(rng, static_cast<size_t>(OC) * C, 0.05);
  const auto bias = Random(rng, OC);
  const auto dy = Random(rng, static_cast<size_t>(B) * OC, 1e-3);  // gradients are small

  std::vector<float> y32(static_cast<size_t>(B) * OC), y8(y32.size());
  LinearForward(y32.data(), x.data(), w.data(), bias.data(), B, C, OC);
  Fp8Linear lin;
  lin.Forward(y8.data(), x.data(), w.data(), bias.data(), B, C, OC);
  EXPECT_LT(RelL2(y8, y32), 0.06);
  EXPECT_GT(RelL2(y8, y32), 1e-3);  // fp8, not fp32
  // Y = dequant(X, 1 × 128 E4M3) · dequant(W, 128 × 128 E4M3)ᵀ + b.
  const auto xq = Dequant(x.data(), B, C, 1, Format::kE4M3);
  const auto wq = Dequant(w.data(), OC, C, fp8::kBlock, Format::kE4M3);
  auto yref = Product(xq, wq, B, OC, C);
  for (int b = 0; b < B; ++b) {
    for (int o = 0; o < OC; ++o) yref[static_cast<size_t>(b) * OC + o] += bias[o];
  }
  EXPECT_LT(RelL2(y8, yref), 1e-5);

  std::vector<float> dx32(static_cast<size_t>(B) * C, 0.5f), dw32(w.size(), 0.25f),
      db32(OC, 0.125f);
  auto dx8 = dx32, dw8 = dw32, db8 = db32;  // both accumulate onto the same start
  LinearBackward(dx32.data(), dw32.data(), db32.data(), dy.data(), x.data(), w.data(), B, C, OC);
  lin.Backward(dx8.data(), dw8.data(), db8.data(), dy.data(), x.data(), B, C, OC);
  // Compare the increments, not the offsets they were added to.
  auto minus = [](std::vector<float> v, float c) {
    for (auto& e : v) e -= c;
    return v;
  };
  const auto ddx32 = minus(dx32, 0.5f), ddx8 = minus(dx8, 0.5f);
  const auto ddw32 = minus(dw32, 0.25f), ddw8 = minus(dw8, 0.25f);
  EXPECT_LT(RelL2(ddx8, ddx32), 0.10);  // E5M2: 2 mantissa bits
  EXPECT_LT(RelL2(ddw8, ddw32), 0.10);
  EXPECT_GT(RelL2(ddx8, ddx32), 1e-3);
  for (int o = 0; o < OC; ++o) EXPECT_NEAR(db8[o], db32[o], 1e-5) << o;  // fp32 sums

  // dX = dequant(dY, 1 × 128 E5M2 along OC) · dequant(W) (the forward's blocks).
  const auto dyq = Dequant(dy.data(), B, OC, 1, Format::kE5M2);
  const auto dx_ref = Product(dyq, Transposed(wq, OC, C), B, C, OC);
  EXPECT_LT(RelL2(ddx8, dx_ref), 1e-4);
  // dW = dequant(dYᵀ, E5M2 along B) · dequant(Xᵀ, E4M3 along B)ᵀ.
  const auto dytq = Dequant(Transposed(dy, B, OC).data(), OC, B, 1, Format::kE5M2);
  const auto xtq = Dequant(Transposed(x, B, C).data(), C, B, 1, Format::kE4M3);
  const auto dw_ref = Product(dytq, xtq, OC, C, B);
  EXPECT_LT(RelL2(ddw8, dw_ref), 1e-4);
  // E4M3 for dY would be a different (here more precise) product: the check above can fail.
  const auto dyq43 = Dequant(dy.data(), B, OC, 1, Format::kE4M3);
  EXPECT_GT(RelL2(Product(dyq43, Transposed(wq, OC, C), B, C, OC), dx_ref), 1e-3);

  const Fp8ComputeStats st = lin.TakeStats();
  // E4M3: X twice (both layouts) and W once; E5M2: dY twice.
  EXPECT_EQ(st.e4m3.elements, 2L * B * C + static_cast<long>(OC) * C);
  EXPECT_EQ(st.e5m2.elements, 2L * B * OC);
  EXPECT_EQ(st.e4m3.saturated + st.e5m2.saturated, 0);  // block scales cover their amax
  EXPECT_GT(st.e4m3.amax, 1.0f);
  EXPECT_EQ(lin.TakeStats().e4m3.elements, 0);  // taken
}

TEST_P(Fp8LinearTest, OverwriteAndNullInputGradient) {
  const auto [B, C, OC] = GetParam();
  common::Rng rng(3);
  const auto x = Random(rng, static_cast<size_t>(B) * C);
  const auto w = Random(rng, static_cast<size_t>(OC) * C, 0.05);
  const auto dy = Random(rng, static_cast<size_t>(B) * OC);
  std::vector<float> y(static_cast<size_t>(B) * OC);
  Fp8Linear lin;
  lin.Forward(y.data(), x.data(), w.data(), nullptr, B, C, OC);
  std::vector<float> dx_acc(static_cast<size_t>(B) * C, 0.0f), dx_over(dx_acc.size(), 123.0f);
  std::vector<float> dw1(w.size(), 0.0f), dw2(w.size(), 0.0f), dw3(w.size(), 0.0f);
  lin.Backward(dx_acc.data(), dw1.data(), nullptr, dy.data(), x.data(), B, C, OC);
  lin.Backward(dx_over.data(), dw2.data(), nullptr, dy.data(), x.data(), B, C, OC, true);
  lin.Backward(nullptr, dw3.data(), nullptr, dy.data(), x.data(), B, C, OC);
  EXPECT_EQ(dx_acc, dx_over);
  EXPECT_EQ(dw1, dw2);
  EXPECT_EQ(dw1, dw3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fp8LinearTest,
                         ::testing::Values(Case{300, 200, 136}, Case{64, 256, 768},
                                           Case{17, 48, 96}));

TEST(Fp8WeightCodesTest, TransposeKeepsEveryValue) {
  common::Rng rng(5);
  const int rows = 200, cols = 300;
  const auto w = Random(rng, static_cast<size_t>(rows) * cols);
  fp8::Fp8Matrix m, t;
  ASSERT_TRUE(fp8::QuantizeWeights(w.data(), rows, cols, Format::kE4M3, &m).ok());
  TransposeWeightCodes(m, &t);
  std::vector<float> dm(w.size()), dt(w.size());
  fp8::Dequantize(m, dm.data());
  fp8::Dequantize(t, dt.data());
  EXPECT_EQ(Transposed(dm, rows, cols), dt);
}

TEST(AmaxHistoryTest, KeepsTheLastEntries) {
  AmaxHistory h(3);
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.Max(), 0.0f);
  h.Push(5.0f);
  h.Push(1.0f);
  h.Push(2.0f);
  EXPECT_EQ(h.Max(), 5.0f);
  h.Push(3.0f);  // 5 falls out
  EXPECT_EQ(h.Max(), 3.0f);
  EXPECT_EQ(h.size(), 3);
}

// Delayed scaling: one scale per tensor from the history; a tensor that grows past it
// saturates, and the count says so; the next call's scale has caught up.
TEST(Fp8LinearDelayedTest, ScalesFromHistoryAndCountsSaturation) {
  const int B = 64, C = 128, OC = 128;
  common::Rng rng(9);
  auto x = Random(rng, static_cast<size_t>(B) * C);
  const auto w = Random(rng, static_cast<size_t>(OC) * C, 0.05);
  std::vector<float> y(static_cast<size_t>(B) * OC), y32(y.size());
  Fp8Linear lin(Fp8ComputeOptions{Fp8Scaling::kDelayed, 4});
  lin.Forward(y.data(), x.data(), w.data(), nullptr, B, C, OC);
  Fp8ComputeStats st = lin.TakeStats();
  EXPECT_EQ(st.e4m3.saturated, 0);  // first call: its own amax
  EXPECT_GT(st.e4m3.scale_min, 0.0f);
  EXPECT_EQ(lin.x_history().size(), 1);
  const float ax = lin.x_history().Max();

  for (auto& v : x) v *= 4.0f;  // the activations grow 4x
  lin.Forward(y.data(), x.data(), w.data(), nullptr, B, C, OC);
  st = lin.TakeStats();
  EXPECT_GT(st.e4m3.saturated, 0);
  EXPECT_FLOAT_EQ(lin.x_history().Max(), 4.0f * ax);
  // Saturated values are clipped to the old range: the output is far off fp32's.
  LinearForward(y32.data(), x.data(), w.data(), nullptr, B, C, OC);
  const double clipped = RelL2(y, y32);
  EXPECT_GT(clipped, 0.05);

  lin.Forward(y.data(), x.data(), w.data(), nullptr, B, C, OC);  // the history has caught up
  st = lin.TakeStats();
  EXPECT_EQ(st.e4m3.saturated, 0);
  EXPECT_LT(RelL2(y, y32), 0.06);
}

}  // namespace
}  // namespace engine
