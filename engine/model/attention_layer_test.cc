// The attention sub-layer: finite differences through QKV, segment attention and the output
// projection, on packed rows (varlen) and one-sample-per-row batches (varlen and padded), and
// agreement between the packed and padded paths sample by sample.
#include "engine/model/attention_layer.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model/sample_fixtures.h"
#include "engine/testing/grad_check.h"
#include "engine/testing/random_vectors.h"

namespace engine {
namespace {

constexpr int kH = 2, kD = 4, kC = kH * kD, kHorizon = 3, kActionDim = 2;

using testing::Random;

std::vector<PolicySample> Samples(common::Rng& rng) {
  return testing::RandomSamples(rng, {{3, 1, 1}, {1, 1, 2}, {5, 2, 1}}, 16, kHorizon, kActionDim,
                                /*patches_per_camera=*/2);
}

struct Params {
  std::vector<float> w_qkv, b_qkv, w_proj, b_proj;
};

Params RandomParams(common::Rng& rng) {
  return {Random(rng, 3 * kC * kC, 0.5), Random(rng, 3 * kC, 0.5), Random(rng, kC * kC, 0.5),
          Random(rng, kC, 0.5)};
}

// Runs the sub-layer on (batch, x) and returns the output, with slots of padding zeroed (their
// values differ between the paths by design).
struct Runner {
  const PackedBatch& batch;
  AttentionKind kind;
  bool causal;
  std::vector<uint8_t> mask;
  std::vector<float> q, k, v, attn, lse;
  kernels::AttentionWorkspace ws;

  Runner(const PackedBatch& b, AttentionKind kd, bool c) : batch(b), kind(kd), causal(c) {
    const size_t N = b.num_slots();
    for (uint8_t m : b.modality) mask.push_back(m != 0);
    q.resize(N * kC);
    k.resize(N * kC);
    v.resize(N * kC);
    attn.resize(N * kC);
    lse.resize(static_cast<size_t>(b.rows) * kH * b.tokens_per_row);
  }
  AttentionGrid Grid() const { return {&batch, kH, kD, causal, kind, mask.data()}; }
  AttentionActs Acts() { return {q.data(), k.data(), v.data(), attn.data(), lse.data()}; }
  std::vector<float> Run(const std::vector<float>& x, const Params& p) {
    std::vector<float> out(x.size());
    EXPECT_TRUE(SelfAttentionForward(out.data(), Acts(), x.data(), p.w_qkv.data(), p.b_qkv.data(),
                                     p.w_proj.data(), p.b_proj.data(), Grid(), &ws)
                    .ok());
    for (size_t i = 0; i < mask.size(); ++i) {
      if (!mask[i]) std::fill(out.begin() + i * kC, out.begin() + (i + 1) * kC, 0.0f);
    }
    return out;
  }
};

void CheckGradients(const PackedBatch& batch, AttentionKind kind, bool causal) {
  common::Rng rng(11);
  Params p = RandomParams(rng);
  const size_t N = batch.num_slots();
  auto x = Random(rng, N * kC, 1.0);
  auto r = Random(rng, N * kC, 1.0);
  Runner run(batch, kind, causal);
  for (size_t i = 0; i < N; ++i) {
    if (!run.mask[i]) std::fill(r.begin() + i * kC, r.begin() + (i + 1) * kC, 0.0f);
  }
  auto loss = [&] {
    auto y = run.Run(x, p);
    double s = 0.0;
    for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
    return s;
  };
  loss();
  std::vector<float> dx(N * kC, 0.0f), dwq(p.w_qkv.size(), 0.0f), dbq(p.b_qkv.size(), 0.0f),
      dwp(p.w_proj.size(), 0.0f), dbp(p.b_proj.size(), 0.0f);
  std::vector<float> s0(N * kC), s1(N * kC), s2(N * kC), s3(N * kC);
  ASSERT_TRUE(SelfAttentionBackward(dx.data(), dwq.data(), dbq.data(), dwp.data(), dbp.data(),
                                    {s0.data(), s1.data(), s2.data(), s3.data()}, r.data(),
                                    run.Acts(), x.data(), p.w_qkv.data(), p.w_proj.data(),
                                    run.Grid(), &run.ws)
                  .ok());
  using testing::ExpectGradientsMatch;
  ExpectGradientsMatch("dinp", x.data(), dx.data(), static_cast<int>(x.size()), loss, 1e-2f);
  ExpectGradientsMatch("dw_qkv", p.w_qkv.data(), dwq.data(), static_cast<int>(dwq.size()), loss,
                       1e-2f);
  ExpectGradientsMatch("db_qkv", p.b_qkv.data(), dbq.data(), static_cast<int>(dbq.size()), loss,
                       1e-2f);
  ExpectGradientsMatch("dw_proj", p.w_proj.data(), dwp.data(), static_cast<int>(dwp.size()), loss,
                       1e-2f);
  ExpectGradientsMatch("db_proj", p.b_proj.data(), dbp.data(), static_cast<int>(dbp.size()), loss,
                       1e-2f);
  for (size_t i = 0; i < N; ++i) {
    if (!run.mask[i]) {
      EXPECT_EQ(dx[i * kC], 0.0f) << "padding slot " << i << " got a gradient";
    }
  }
}

TEST(SelfAttentionTest, PackedVarlenGradients) {
  common::Rng rng(1);
  auto samples = Samples(rng);
  PackedBatch b = testing::PackedBatchOf(samples, 30, kHorizon, kActionDim);
  ASSERT_LT(b.rows, 3);  // several samples share a row
  CheckGradients(b, AttentionKind::kVarlen, false);
  CheckGradients(b, AttentionKind::kVarlen, true);
}

TEST(SelfAttentionTest, PaddedGradients) {
  common::Rng rng(1);
  auto samples = Samples(rng);
  PackedBatch b = testing::PaddedBatchOf(samples, 24, kHorizon, kActionDim);
  CheckGradients(b, AttentionKind::kPadded, false);
  CheckGradients(b, AttentionKind::kPadded, true);
  CheckGradients(b, AttentionKind::kVarlen, false);
}

// The same samples packed (varlen) and one per row (padded kernel) give the same output per
// sample: attention never crosses a sample boundary.
TEST(SelfAttentionTest, PackedMatchesPadded) {
  common::Rng rng(2);
  auto samples = Samples(rng);
  PackedBatch packed = testing::PackedBatchOf(samples, 30, kHorizon, kActionDim);
  PackedBatch padded = testing::PaddedBatchOf(samples, 24, kHorizon, kActionDim);
  Params p = RandomParams(rng);
  // Token inputs keyed by (sample length, position), so both layouts see the same tokens
  // (the three samples have distinct lengths).
  auto fill = [&](const PackedBatch& b) {
    std::vector<float> x(static_cast<size_t>(b.num_slots()) * kC, 0.0f);
    for (int r = 0; r < b.rows; ++r) {
      auto cu = b.CuSeqlens(r);
      for (size_t s = 0; s + 1 < cu.size(); ++s) {
        const int len = cu[s + 1] - cu[s];
        for (int t = cu[s]; t < cu[s + 1]; ++t) {
          const int i = r * b.tokens_per_row + t;
          for (int c = 0; c < kC; ++c) {
            x[i * kC + c] = std::sin(0.7f * b.position[i] + 1.3f * c + 0.37f * len);
          }
        }
      }
    }
    return x;
  };
  for (bool causal : {false, true}) {
    Runner a(packed, AttentionKind::kVarlen, causal), bpad(padded, AttentionKind::kPadded, causal);
    auto ya = a.Run(fill(packed), p), yb = bpad.Run(fill(padded), p);
    // Compare each sample's outputs, matched by the sample's token count (distinct here).
    for (int sa = 0; sa < packed.num_samples(); ++sa) {
      int row_a = 0;
      while (packed.row_begin[row_a + 1] <= sa) ++row_a;
      auto cua = packed.CuSeqlens(row_a);
      const int start_a = row_a * packed.tokens_per_row + cua[sa - packed.row_begin[row_a]];
      const int len = cua[sa - packed.row_begin[row_a] + 1] - cua[sa - packed.row_begin[row_a]];
      int sb = 0;
      while (padded.RowTokens(sb) != len) ++sb;
      const int start_b = sb * padded.tokens_per_row;
      for (int t = 0; t < len * kC; ++t) {
        ASSERT_NEAR(ya[start_a * kC + t], yb[start_b * kC + t], 1e-5) << "sample " << sa;
      }
    }
  }
}

}  // namespace
}  // namespace engine
