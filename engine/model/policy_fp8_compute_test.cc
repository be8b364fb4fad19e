// The policy transformer with FP8 compute (PolicyTransformer::EnableFp8Compute): its loss and
// gradients against the same model in fp32 on the same batch (FP8 rounding error only, and not
// zero, so the blocks' products really ran in FP8), which tensors' gradients stay exact, and the
// statistics it reports.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model/policy_transformer.h"
#include "engine/model/sample_fixtures.h"

namespace engine {
namespace {

constexpr int kFp8Horizon = 4, kFp8ActionDim = 7;

PolicyConfig SmallConfig() {
  PolicyConfig c;
  c.d_model = 128;
  c.layers = 2;
  c.heads = 4;
  c.mlp = 256;
  c.vocab = 64;
  c.max_positions = 128;
  c.action_dim = kFp8ActionDim;
  c.action_horizon = kFp8Horizon;
  return c;
}

std::unique_ptr<PolicyTransformer> Make(uint64_t seed) {
  auto m = PolicyTransformer::Create(SmallConfig());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->Init(seed);
  return std::move(*m);
}

PackedBatch Batch() {
  common::Rng rng(11);
  const auto samples = testing::RandomSamples(
      rng, {{6, 1, 1}, {3, 2, 1}, {9, 1, 2}, {4, 1, 1}, {7, 2, 1}}, 64, kFp8Horizon, kFp8ActionDim,
      /*patches_per_camera=*/4);
  return testing::PackedBatchOf(samples, 128, kFp8Horizon, kFp8ActionDim);
}

double RelL2(const float* a, const float* ref, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

TEST(PolicyFp8ComputeTest, LossAndGradientsWithinFp8ErrorOfFp32) {
  auto fp32 = Make(3), fp8 = Make(3);
  ASSERT_TRUE(fp8->EnableFp8Compute({}).ok());
  EXPECT_TRUE(fp8->fp8_compute());
  EXPECT_FALSE(fp32->fp8_compute());
  const PackedBatch b = Batch();
  auto l32 = fp32->Forward(b);
  auto l8 = fp8->Forward(b);
  ASSERT_TRUE(l32.ok() && l8.ok());
  EXPECT_NEAR(*l8, *l32, 0.01 * *l32);
  EXPECT_NE(*l8, *l32);
  fp32->ZeroGrad();
  fp8->ZeroGrad();
  ASSERT_TRUE(fp32->Backward().ok());
  ASSERT_TRUE(fp8->Backward().ok());

  for (const ParamTensor& t : fp32->layout().tensors()) {
    const double e = RelL2(fp8->grads() + t.offset, fp32->grads() + t.offset, t.size);
    const bool block_linear = t.name.rfind("blocks.", 0) == 0 &&
                              t.name.find("weight") != std::string::npos &&
                              t.name.find("norm") == std::string::npos;
    // The blocks' weight gradients are FP8 products (E5M2 × E4M3); every other gradient reaches
    // fp32 code through dX = dY · W of FP8 products too, so none is exact, but all are close.
    EXPECT_LT(e, 0.15) << t.name;
    if (block_linear) {
      EXPECT_GT(e, 1e-4) << t.name << " did not go through FP8";
    }
  }
  const Fp8ComputeStats st = fp8->TakeFp8ComputeStats();
  const PolicyConfig c = SmallConfig();
  // The model computes on the real tokens only (no padding slot reaches a product).
  long N = 0;
  for (int r = 0; r < b.rows; ++r) N += b.RowTokens(r);
  ASSERT_LT(N, b.num_slots());
  const long C = c.d_model, M = c.mlp;
  // Per layer E4M3: X twice (forward, and along tokens for dW) and W once, for q, k, v, proj
  // (C → C) and fc1 (C → M), fc2 (M → C); E5M2: dY twice per product.
  const long e4m3 =
      c.layers * (4 * (2 * N * C + C * C) + (2 * N * C + M * C) + (2 * N * M + C * M));
  const long e5m2 = c.layers * (4 * 2 * N * C + 2 * N * M + 2 * N * C);
  EXPECT_EQ(st.e4m3.elements, e4m3);
  EXPECT_EQ(st.e5m2.elements, e5m2);
  EXPECT_GT(st.e4m3.amax, 0.0f);
  EXPECT_GT(st.e5m2.amax, 0.0f);
  EXPECT_LE(st.e5m2.scale_min, st.e5m2.scale_max);
  EXPECT_EQ(st.e4m3.saturated, 0);
  EXPECT_EQ(st.e4m3.nan + st.e5m2.nan, 0);
  EXPECT_EQ(fp8->TakeFp8ComputeStats().e4m3.elements, 0);
  EXPECT_EQ(fp32->TakeFp8ComputeStats().e4m3.elements, 0);
}

TEST(PolicyFp8ComputeTest, RefusesFp8WeightsAndBadOptions) {
  auto m = Make(1);
  EXPECT_FALSE(m->EnableFp8Compute(Fp8ComputeOptions{Fp8Scaling::kDelayed, 0}).ok());
  ASSERT_TRUE(m->EnableFp8Compute({}).ok());
  EXPECT_EQ(m->SetFp8Weights({}).code(), common::Code::kFailedPrecondition);
}

}  // namespace
}  // namespace engine
