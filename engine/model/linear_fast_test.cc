// The fast Linear paths (Eigen, oneDNN fp32, oneDNN bf16) against the plain-loop reference of
// layers.h, on fresh random inputs of awkward (non-multiple-of-16) shapes.
#include "engine/model/linear_fast.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "engine/cpu/cpu_path.h"
#include "engine/fp8/block_quant.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/model/layers.h"
#include "engine/testing/random_vectors.h"

namespace engine {
namespace {

using testing::Random;

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double tol,
                 const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * (1.0 + std::fabs(b[i]))) << what << "[" << i << "]";
  }
}

// Sets the process's LinearCompute for one test and puts back the one before.
class ScopedCompute {
 public:
  explicit ScopedCompute(LinearCompute c) : before_(ActiveLinearCompute()) { SetLinearCompute(c); }
  ~ScopedCompute() { SetLinearCompute(before_); }

 private:
  LinearCompute before_;
};

// ‖a − b‖₂ / ‖b‖₂.
double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class LinearComputeTest : public ::testing::TestWithParam<LinearCompute> {};

TEST_P(LinearComputeTest, ForwardAndBackwardMatchReference) {
  ScopedCompute scoped(GetParam());
  common::Rng rng(7);
  for (auto [B, C, OC] : {std::tuple{1, 1, 1}, {37, 29, 53}, {130, 192, 64}, {5, 256, 768}}) {
    auto x = Random(rng, B * C), w = Random(rng, OC * C), b = Random(rng, OC);
    auto dy = Random(rng, B * OC);
    std::vector<float> y_ref(B * OC), y(B * OC);
    LinearForward(y_ref.data(), x.data(), w.data(), b.data(), B, C, OC);
    LinearForwardFast(y.data(), x.data(), w.data(), b.data(), B, C, OC);
    ExpectClose(y, y_ref, 1e-4, "out");
    LinearForwardFast(y.data(), x.data(), w.data(), nullptr, B, C, OC);
    LinearForward(y_ref.data(), x.data(), w.data(), nullptr, B, C, OC);
    ExpectClose(y, y_ref, 1e-4, "out without bias");

    // Backward accumulates: start both from the same non-zero values.
    auto dx0 = Random(rng, B * C), dw0 = Random(rng, OC * C), db0 = Random(rng, OC);
    auto dx_ref = dx0, dw_ref = dw0, db_ref = db0, dx = dx0, dw = dw0, db = db0;
    LinearBackward(dx_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(), w.data(), B, C,
                   OC);
    LinearBackwardFast(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), B, C, OC);
    ExpectClose(dx, dx_ref, 1e-4, "dinp");
    ExpectClose(dw, dw_ref, 1e-4, "dweight");
    ExpectClose(db, db_ref, 1e-4, "dbias");
    // Null dinp and dbias are allowed.
    LinearBackwardFast(nullptr, dw.data(), nullptr, dy.data(), x.data(), w.data(), B, C, OC);
    // overwrite_dinp writes dinp instead of adding to it.
    std::vector<float> dx_only(B * C, 0.0f), dx_over = Random(rng, B * C), dw_sink(OC * C);
    LinearBackward(dx_only.data(), dw_sink.data(), nullptr, dy.data(), x.data(), w.data(), B, C,
                   OC);
    LinearBackwardFast(dx_over.data(), dw_sink.data(), nullptr, dy.data(), x.data(), w.data(), B, C,
                       OC, /*overwrite_dinp=*/true);
    ExpectClose(dx_over, dx_only, 1e-4, "overwritten dinp");
  }
}

INSTANTIATE_TEST_SUITE_P(Fp32, LinearComputeTest,
                         ::testing::Values(LinearCompute::kEigenFp32, LinearCompute::kOnednnFp32),
                         [](const auto& info) {
                           return info.param == LinearCompute::kEigenFp32 ? "Eigen" : "Onednn";
                         });

// bf16 operands, fp32 accumulation: each product within bf16's rounding (8 significant bits:
// a relative error of about 2^-9 per operand, which averages down over a dot product) of the
// fp32 reference, yet measurably not the fp32 result (the operands really were rounded).
TEST(LinearBf16Test, ForwardAndBackwardWithinBf16Tolerance) {
  if (!Bf16ComputeSupported()) GTEST_SKIP() << "no AVX512_BF16 or AMX on this CPU";
  ScopedCompute scoped(LinearCompute::kOnednnBf16);
  common::Rng rng(9);
  for (auto [B, C, OC] : {std::tuple{37, 29, 53}, {130, 192, 64}, {257, 256, 768}}) {
    auto x = Random(rng, B * C), w = Random(rng, OC * C), b = Random(rng, OC);
    auto dy = Random(rng, B * OC);
    std::vector<float> y_ref(B * OC), y(B * OC);
    LinearForward(y_ref.data(), x.data(), w.data(), b.data(), B, C, OC);
    LinearForwardFast(y.data(), x.data(), w.data(), b.data(), B, C, OC);
    const double fwd = RelativeL2(y, y_ref);
    EXPECT_LT(fwd, 8e-3) << B << "x" << C << "x" << OC;
    EXPECT_GT(fwd, 1e-5) << "bf16 forward equals fp32: operands were not rounded";

    std::vector<float> dx_ref(B * C, 0.0f), dw_ref(OC * C, 0.0f), db_ref(OC, 0.0f);
    std::vector<float> dx = dx_ref, dw = dw_ref, db = db_ref;
    LinearBackward(dx_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(), w.data(), B, C,
                   OC);
    LinearBackwardFast(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), B, C, OC);
    EXPECT_LT(RelativeL2(dx, dx_ref), 8e-3) << "dinp";
    EXPECT_LT(RelativeL2(dw, dw_ref), 8e-3) << "dweight";
    EXPECT_GT(RelativeL2(dw, dw_ref), 1e-5) << "dweight";
    ExpectClose(db, db_ref, 1e-4, "dbias (fp32 sums)");  // not a product: stays fp32
  }
}

// A product of FP8 weights: below kFp8GemmMinRows rows the weight-only fp8 product on the codes,
// from it (where oneDNN has native bf16) the bf16 GEMM on the dequantised weights, bitwise what
// each of those computes. Either way within 2^-7 · Σ|x·w| (x and the weights each rounded to
// bf16 at most once, ≤ 2^-8 relative apiece) of the fp32 product of the dequantised weights.
TEST(LinearFp8Test, FewRowsDecodeTheCodesManyRowsRunTheBf16Gemm) {
  common::Rng rng(10);
  const int C = 300, OC = 200;  // ragged against the 128 x 128 blocks
  auto w = Random(rng, OC * C), b = Random(rng, OC);
  fp8::Fp8Matrix w8;
  ASSERT_TRUE(fp8::QuantizeWeights(w.data(), OC, C, fp8::Format::kE4M3, &w8).ok());
  std::vector<float> deq(w.size());
  fp8::Dequantize(w8, deq.data());
  for (int B : {1, kFp8GemmMinRows - 1, kFp8GemmMinRows, 2 * kFp8GemmMinRows + 3}) {
    auto x = Random(rng, B * C);
    std::vector<float> y(B * OC), y_codes(B * OC), y_gemm(B * OC), y_ref(B * OC);
    LinearForwardMaybeFp8(y.data(), x.data(), deq.data(), &w8, b.data(), B, C, OC);
    ASSERT_TRUE(fp8::MatmulWeightFp8(y_codes.data(), x.data(), B, w8, b.data()).ok());
    {
      ScopedCompute scoped(LinearCompute::kOnednnBf16);
      LinearForwardFast(y_gemm.data(), x.data(), deq.data(), b.data(), B, C, OC);
    }
    LinearForward(y_ref.data(), x.data(), deq.data(), b.data(), B, C, OC);
    const bool gemm = Fp8RowsRunBf16Gemm(B);
    EXPECT_EQ(gemm, B >= kFp8GemmMinRows && cpu::ActiveCpuPath() == cpu::CpuPath::kAvx512 &&
                        Bf16ComputeSupported());
    EXPECT_EQ(y, gemm ? y_gemm : y_codes) << B << " rows";
    for (int i = 0; i < B; ++i) {
      for (int o = 0; o < OC; ++o) {
        double abs_sum = 0.0;
        for (int k = 0; k < C; ++k) abs_sum += std::fabs(x[i * C + k] * deq[o * C + k]);
        ASSERT_NEAR(y[i * OC + o], y_ref[i * OC + o], abs_sum / 128 + 1e-5)
            << B << " rows, (" << i << ", " << o << ")";
      }
    }
  }
}

TEST(LinearFastTest, GeluMatchesReference) {
  common::Rng rng(8);
  const int n = 10000;  // more than one chunk, not a multiple of it
  auto x = Random(rng, n), dy = Random(rng, n);
  for (auto& v : x) v *= 3.0f;
  std::vector<float> y_ref(n), y(n);
  GeluForward(y_ref.data(), x.data(), n);
  GeluForwardFast(y.data(), x.data(), n);
  ExpectClose(y, y_ref, 1e-5, "gelu");
  auto d0 = Random(rng, n);
  auto d_ref = d0, d = d0;
  GeluBackward(d_ref.data(), x.data(), dy.data(), n);
  GeluBackwardFast(d.data(), x.data(), dy.data(), n);
  ExpectClose(d, d_ref, 1e-5, "gelu backward");
  std::vector<float> zero(n, 0.0f), g = dy;
  GeluBackward(zero.data(), x.data(), dy.data(), n);
  GeluGradInPlace(g.data(), x.data(), n);
  ExpectClose(g, zero, 1e-5, "gelu grad in place");
}

}  // namespace
}  // namespace engine
