// The whole policy transformer: parameter layout, finite differences through the full model,
// packed == unpacked == padded training (loss and every gradient), Euler sampling, batch checks.
#include "engine/model/policy_transformer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "api/job_spec.h"
#include "engine/model/policy_options.h"
#include "engine/model/sample_fixtures.h"
#include "engine/testing/grad_check.h"

namespace engine {
namespace {

constexpr int kPolicyHorizon = 3, kPolicyActionDim = 2;

PolicyConfig TinyConfig() {
  PolicyConfig c;
  c.d_model = 16;
  c.layers = 2;
  c.heads = 2;
  c.mlp = 24;
  c.vocab = 32;
  c.max_positions = 32;
  c.action_dim = kPolicyActionDim;
  c.action_horizon = kPolicyHorizon;
  return c;
}

std::unique_ptr<PolicyTransformer> Make(const PolicyConfig& c, uint64_t seed = 5) {
  auto m = PolicyTransformer::Create(c);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->Init(seed);
  // Larger weights than the init so every path carries a visible gradient.
  common::Rng rng(99);
  for (const ParamTensor& t : (*m)->layout().tensors()) {
    float* p = (*m)->params() + t.offset;
    for (size_t i = 0; i < t.size; ++i) p[i] += static_cast<float>(0.2 * rng.Normal());
  }
  return std::move(*m);
}

std::vector<PolicySample> Samples(uint64_t seed) {
  common::Rng rng(seed);
  return testing::RandomSamples(rng, {{3, 1, 1}, {1, 1, 2}, {5, 2, 1}, {2, 1, 1}}, 32,
                                kPolicyHorizon, kPolicyActionDim, /*patches_per_camera=*/2);
}

TEST(PolicyConfigTest, Validation) {
  PolicyConfig c = TinyConfig();
  EXPECT_TRUE(c.Validate().ok());
  c.heads = 3;
  EXPECT_EQ(c.Validate().field(), "heads");
  c = TinyConfig();
  c.d_model = 256;
  c.heads = 1;
  EXPECT_EQ(c.Validate().field(), "heads");  // head dim 256 > 128
  c = TinyConfig();
  c.mlp = 0;
  EXPECT_FALSE(PolicyTransformer::Create(c).ok());
}

TEST(PolicyConfigTest, FromJobSpecOptions) {
  auto spec = api::ParseJobSpec(nlohmann::json::parse(R"({"name":"p","kind":"train",
      "resources":{"nodes":1},
      "engine":{"model":{"d_model":64,"layers":3,"heads":2,"action_horizon":8,"action_dim":5},
                "data":{"packing":false},"attention":"padded"}})"),
                                {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto c = PolicyConfigFromOptions(spec->engine);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->d_model, 64);
  EXPECT_EQ(c->layers, 3);
  EXPECT_EQ(c->heads, 2);
  EXPECT_EQ(c->mlp, 256);
  EXPECT_EQ(c->action_horizon, 8);
  EXPECT_EQ(c->action_dim, 5);
  EXPECT_EQ(c->attention, AttentionKind::kPadded);
  api::EngineOptions bad = spec->engine;
  bad.model.heads = 3;  // what ParseJobSpec would have refused
  EXPECT_EQ(PolicyConfigFromOptions(bad).status().field(), "engine.model.heads");
  bad = spec->engine;
  bad.attention = "flash";
  EXPECT_EQ(PolicyConfigFromOptions(bad).status().field(), "engine.attention");
}

TEST(PolicyTransformerTest, LayoutNamesShapesAndOffsets) {
  PolicyConfig c;  // reference size
  auto m = PolicyTransformer::Create(c);
  ASSERT_TRUE(m.ok());
  const ParamLayout& L = (*m)->layout();
  const ParamTensor* qkv = L.Find("blocks.3.attn.qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->shape, (std::vector<int>{768, 256}));
  EXPECT_EQ(qkv->offset % 16, 0u);
  EXPECT_EQ(L.Find("blocks.4.attn.qkv.weight"), nullptr);
  size_t expect = 512 * 256 + 512 * 256 + 4 * 256 + 256 * 192 + 256 + 256 * 16 + 256 + 256 * 7 +
                  256 + 256 * 64 + 256 + 256 + 7 * 256 + 7;
  expect +=
      4 * (256 + 768 * 256 + 768 + 256 * 256 + 256 + 256 + 1024 * 256 + 1024 + 256 * 1024 + 256);
  EXPECT_EQ(L.num_parameters(), expect);
  EXPECT_GE((*m)->num_params(), expect);
  // Tensors do not overlap and appear in order.
  size_t end = 0;
  for (const ParamTensor& t : L.tensors()) {
    EXPECT_GE(t.offset, end) << t.name;
    end = t.offset + t.size;
  }
  EXPECT_EQ(end, (*m)->num_params());
  (*m)->Init(1);
  EXPECT_EQ((*m)->param("norm_f.weight")[0], 1.0f);
  EXPECT_EQ((*m)->param("blocks.0.mlp.fc1.bias")[3], 0.0f);
  auto m2 = PolicyTransformer::Create(c);
  (*m2)->Init(1);
  EXPECT_EQ(std::vector<float>((*m)->params(), (*m)->params() + (*m)->num_params()),
            std::vector<float>((*m2)->params(), (*m2)->params() + (*m2)->num_params()));
}

// Finite differences through the whole model, for a sample of entries of every tensor.
void CheckModelGradients(const PolicyConfig& c, const PackedBatch& batch) {
  auto m = Make(c);
  m->ZeroGrad();
  auto loss0 = m->Forward(batch);
  ASSERT_TRUE(loss0.ok()) << loss0.status().ToString();
  ASSERT_TRUE(m->Backward().ok());
  std::vector<float> analytic(m->grads(), m->grads() + m->num_params());
  auto loss = [&] { return static_cast<double>(m->Forward(batch).value()); };
  common::Rng pick(3);
  for (const ParamTensor& t : m->layout().tensors()) {
    for (int k = 0; k < 6; ++k) {
      const size_t i = t.offset + pick.NextU64() % t.size;
      const double numeric = testing::NumericGrad(m->params() + i, loss, 1e-2f);
      EXPECT_NEAR(analytic[i], numeric, 2e-4 + 3e-2 * std::fabs(numeric))
          << t.name << "[" << i - t.offset << "]";
    }
  }
}

TEST(PolicyTransformerTest, GradientsMatchFiniteDifferencesPacked) {
  auto samples = Samples(1);
  PackedBatch b = testing::PackedBatchOf(samples, 32, kPolicyHorizon, kPolicyActionDim);
  ASSERT_LT(b.rows, static_cast<int>(samples.size()));
  CheckModelGradients(TinyConfig(), b);
  PolicyConfig causal = TinyConfig();
  causal.causal = true;
  CheckModelGradients(causal, b);
}

TEST(PolicyTransformerTest, GradientsMatchFiniteDifferencesPadded) {
  auto samples = Samples(2);
  PolicyConfig c = TinyConfig();
  c.attention = AttentionKind::kPadded;
  CheckModelGradients(c, testing::PaddedBatchOf(samples, 24, kPolicyHorizon, kPolicyActionDim));
}

struct Outcome {
  float loss;
  std::vector<float> grads;
};

Outcome Train(PolicyConfig c, AttentionKind kind, const PackedBatch& b) {
  c.attention = kind;
  auto m = Make(c);
  m->ZeroGrad();
  auto loss = m->Forward(b);
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_TRUE(m->Backward().ok());
  return {*loss, std::vector<float>(m->grads(), m->grads() + m->num_params())};
}

// The central property of packing: the same samples packed into shared rows, one per row with
// the varlen kernel, and one per row with the padded kernel give the same loss and the same
// gradient for every parameter tensor.
TEST(PolicyTransformerTest, PackedAndUnpackedComputeTheSameFunction) {
  for (bool causal : {false, true}) {
    PolicyConfig c = TinyConfig();
    c.causal = causal;
    auto samples = Samples(3);
    PackedBatch packed = testing::PackedBatchOf(samples, 32, kPolicyHorizon, kPolicyActionDim);
    PackedBatch padded = testing::PaddedBatchOf(samples, 24, kPolicyHorizon, kPolicyActionDim);
    ASSERT_LT(packed.rows, padded.rows);
    const Outcome a = Train(c, AttentionKind::kVarlen, packed);
    const Outcome b = Train(c, AttentionKind::kVarlen, padded);
    const Outcome p = Train(c, AttentionKind::kPadded, padded);
    EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::fabs(b.loss));
    EXPECT_NEAR(a.loss, p.loss, 1e-6 * std::fabs(p.loss));
    auto m = PolicyTransformer::Create(c);
    for (const ParamTensor& t : (*m)->layout().tensors()) {
      for (const Outcome* o : {&b, &p}) {
        double diff = 0.0, norm = 0.0;
        for (size_t i = t.offset; i < t.offset + t.size; ++i) {
          diff += std::pow(static_cast<double>(a.grads[i]) - o->grads[i], 2);
          norm += std::pow(static_cast<double>(o->grads[i]), 2);
        }
        EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 1e-12)
            << t.name << " causal " << causal;
        if (t.name != "embed.token" && t.name != "embed.position") {
          EXPECT_GT(norm, 0.0) << t.name << " has no gradient";
        }
      }
    }
  }
}

// Varlen computes on the real tokens only, rows back to back; the outside still sees the slot
// layout. Against the padded kernel (which computes on every slot) on the same one-sample rows,
// one of them exactly full: final_hidden() agrees on real slots and is zero on padding, and a
// gradient given in the slot layout to BackwardFromHidden reaches the same parameter gradients.
TEST(PolicyTransformerTest, RealTokensOnlyKeepsTheSlotLayoutOutside) {
  const PolicyConfig c = TinyConfig();
  auto samples = Samples(6);
  int longest = 0;
  for (const auto& s : samples) longest = std::max(longest, s.NumTokens(kPolicyHorizon));
  const PackedBatch b = testing::PaddedBatchOf(samples, longest, kPolicyHorizon, kPolicyActionDim);
  PolicyConfig cv = c, cp = c;
  cv.attention = AttentionKind::kVarlen;
  cp.attention = AttentionKind::kPadded;
  auto varlen = Make(cv), padded = Make(cp);
  ASSERT_TRUE(varlen->Forward(b).ok());
  ASSERT_TRUE(padded->Forward(b).ok());
  const long C = c.d_model, N = b.num_slots();
  common::Rng rng(8);
  std::vector<float> d_hidden(N * C, 0.0f);
  int pad_slots = 0;
  for (long i = 0; i < N; ++i) {
    const bool pad = static_cast<Modality>(b.modality[i]) == Modality::kPad;
    pad_slots += pad;
    for (long e = 0; e < C; ++e) {
      const float hv = varlen->final_hidden()[i * C + e], hp = padded->final_hidden()[i * C + e];
      if (pad) {
        ASSERT_EQ(hv, 0.0f) << "slot " << i;
        ASSERT_EQ(varlen->embeddings()[i * C + e], 0.0f) << "slot " << i;
      } else {
        ASSERT_NEAR(hv, hp, 1e-5f * (1.0f + std::fabs(hp))) << "slot " << i;
        d_hidden[i * C + e] = static_cast<float>(rng.Normal());
      }
    }
  }
  ASSERT_GT(pad_slots, 0);
  varlen->ZeroGrad();
  padded->ZeroGrad();
  ASSERT_TRUE(varlen->BackwardFromHidden(d_hidden.data()).ok());
  ASSERT_TRUE(padded->BackwardFromHidden(d_hidden.data()).ok());
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < varlen->num_params(); ++i) {
    diff += std::pow(static_cast<double>(varlen->grads()[i]) - padded->grads()[i], 2);
    norm += std::pow(static_cast<double>(padded->grads()[i]), 2);
  }
  EXPECT_GT(norm, 0.0);
  EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm));
}

TEST(PolicyTransformerTest, LossNormalizerAndAccumulation) {
  auto samples = Samples(4);
  PackedBatch b = testing::PackedBatchOf(samples, 32, kPolicyHorizon, kPolicyActionDim);
  auto m = Make(TinyConfig());
  m->ZeroGrad();
  const float l1 = m->Forward(b).value();
  ASSERT_TRUE(m->Backward().ok());
  std::vector<float> g1(m->grads(), m->grads() + m->num_params());
  ASSERT_TRUE(m->Backward().ok());  // accumulates
  for (size_t i = 0; i < g1.size(); i += 97) EXPECT_FLOAT_EQ(m->grads()[i], 2 * g1[i]);
  // A global normaliser twice the local one halves the loss and the gradient.
  b.loss_normalizer = 2.0 * b.WeightTotal();
  m->ZeroGrad();
  EXPECT_NEAR(m->Forward(b).value(), 0.5f * l1, 1e-6 * l1);
  ASSERT_TRUE(m->Backward().ok());
  for (size_t i = 0; i < g1.size(); i += 97) EXPECT_NEAR(m->grads()[i], 0.5f * g1[i], 1e-6);
}

// The backward's ready hook reports every gradient entry exactly once, last layers first, and
// each range is final when reported (nothing later in backward writes it).
TEST(PolicyTransformerTest, BackwardReportsFinalGradientRangesInReverseOrder) {
  auto samples = Samples(6);
  PackedBatch b = testing::PackedBatchOf(samples, 32, kPolicyHorizon, kPolicyActionDim);
  auto m = Make(TinyConfig());
  m->ZeroGrad();
  ASSERT_TRUE(m->Forward(b).ok());
  std::vector<std::pair<size_t, size_t>> ranges;
  std::vector<std::vector<float>> snapshots;
  int polls = 0;
  BackwardHooks hooks;
  hooks.ready = [&](size_t begin, size_t end) {
    ranges.push_back({begin, end});
    snapshots.emplace_back(m->grads() + begin, m->grads() + end);
  };
  hooks.poll = [&] { ++polls; };
  ASSERT_TRUE(m->Backward(&hooks).ok());
  ASSERT_EQ(ranges.size(), static_cast<size_t>(TinyConfig().layers + 2));
  EXPECT_EQ(ranges.front().second, m->num_params());
  EXPECT_EQ(ranges.back().first, 0u);
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].second, ranges[i - 1].first);
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_TRUE(std::equal(snapshots[i].begin(), snapshots[i].end(), m->grads() + ranges[i].first))
        << "range " << i << " changed after it was reported final";
  }
  EXPECT_GE(polls, TinyConfig().layers);
  // Hooks do not change the gradients.
  std::vector<float> with_hooks(m->grads(), m->grads() + m->num_params());
  m->ZeroGrad();
  ASSERT_TRUE(m->Forward(b).ok());
  ASSERT_TRUE(m->Backward().ok());
  EXPECT_TRUE(std::equal(with_hooks.begin(), with_hooks.end(), m->grads()));
}

TEST(PolicyTransformerTest, SampleActionsIntegratesTheVelocity) {
  auto samples = Samples(5);
  PackedBatch b = testing::PackedBatchOf(samples, 32, kPolicyHorizon, kPolicyActionDim);
  auto m = Make(TinyConfig());
  // A head that ignores its input predicts a constant velocity c: x(1) = noise + c, any steps.
  float* w = m->param("action_head.weight");
  float* bias = m->param("action_head.bias");
  std::fill(w, w + kPolicyActionDim * 16, 0.0f);
  bias[0] = 0.5f;
  bias[1] = -2.0f;
  const int n = b.num_actions() * kPolicyActionDim;
  std::vector<float> noise(n), out(n);
  common::Rng rng(6);
  for (float& z : noise) z = static_cast<float>(rng.Normal());
  for (int steps : {1, 4}) {
    ASSERT_TRUE(m->SampleActions(&b, noise.data(), steps, out.data()).ok());
    for (int i = 0; i < n; ++i) ASSERT_NEAR(out[i], noise[i] + bias[i % kPolicyActionDim], 1e-5);
  }
  EXPECT_FALSE(m->SampleActions(&b, noise.data(), 0, out.data()).ok());
  EXPECT_FALSE(m->Backward().ok());  // sampling leaves nothing to differentiate
  // With a real head, different step counts give different (finite) actions.
  auto m2 = Make(TinyConfig());
  std::vector<float> a1(n), a4(n);
  ASSERT_TRUE(m2->SampleActions(&b, noise.data(), 1, a1.data()).ok());
  ASSERT_TRUE(m2->SampleActions(&b, noise.data(), 4, a4.data()).ok());
  EXPECT_NE(a1, a4);
  for (float x : a4) EXPECT_TRUE(std::isfinite(x));
}

TEST(PolicyTransformerTest, RejectsBadBatches) {
  auto samples = Samples(6);
  PackedBatch packed = testing::PackedBatchOf(samples, 32, kPolicyHorizon, kPolicyActionDim);
  PolicyConfig c = TinyConfig();
  c.attention = AttentionKind::kPadded;
  auto padded_model = Make(c);
  EXPECT_FALSE(padded_model->Forward(packed).ok());  // several samples in one row
  auto m = Make(TinyConfig());
  PackedBatch bad = packed;
  bad.action_dim = 3;
  EXPECT_FALSE(m->Forward(bad).ok());
  bad = packed;
  bad.index[0] = 32;  // language id ≥ vocab
  EXPECT_FALSE(m->Forward(bad).ok());
}

TEST(PolicyTransformerTest, ActivationsAreReusedAcrossSteps) {
  auto m = Make(TinyConfig());
  m->Reserve(4, 32);
  const size_t reserved = m->activation_floats();
  for (uint64_t s = 0; s < 3; ++s) {
    auto samples = Samples(10 + s);
    PackedBatch b = testing::PackedBatchOf(samples, 32, kPolicyHorizon, kPolicyActionDim);
    ASSERT_LE(b.rows, 4);
    ASSERT_TRUE(m->Forward(b).ok());
    ASSERT_TRUE(m->Backward().ok());
    EXPECT_EQ(m->activation_floats(), reserved);
  }
}

}  // namespace
}  // namespace engine
