#include "engine/policy/actor_critic.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "engine/format/checkpoint_model.h"
#include "engine/sim/reach_env.h"

namespace engine {
namespace {

PolicyConfig TinyConfig() {
  PolicyConfig c;
  c.d_model = 16;
  c.layers = 1;
  c.heads = 2;
  c.mlp = 32;
  c.action_dim = 3;
  c.action_horizon = 2;
  return c;
}

std::vector<PolicySample> Observations(int n, int cameras) {
  sim::ReachEnvConfig ec;
  ec.num_envs = n;
  ec.action_dim = 3;
  ec.cameras = cameras;
  auto env = std::move(*sim::ReachVecEnv::Create(ec));
  env->Reset(11);
  return env->observations();
}

// L = Σ c_mean · mean + Σ c_value · value + Σ c_std · log_std, in double.
struct Functional {
  std::vector<float> c_mean, c_value, c_std;
  double Eval(ActorCritic& ac, const std::vector<PolicySample>& obs) const {
    EXPECT_TRUE(ac.Forward(obs).ok());
    double l = 0;
    for (size_t i = 0; i < c_mean.size(); ++i) l += double(c_mean[i]) * ac.mean()[i];
    for (size_t i = 0; i < c_value.size(); ++i) l += double(c_value[i]) * ac.value()[i];
    for (size_t i = 0; i < c_std.size(); ++i) l += double(c_std[i]) * ac.log_std()[i];
    return l;
  }
};

TEST(ActorCriticTest, GradientsMatchFiniteDifferences) {
  auto ac = std::move(*ActorCritic::Create(TinyConfig(), 5, -0.5f));
  // Non-zero value head, so the trunk sees the value's gradient too.
  for (size_t i = 0; i < ac->heads().size(); ++i) {
    ac->heads()[i] += 0.1f * std::sin(static_cast<float>(i));
  }
  const auto obs = Observations(3, 1);
  Functional f;
  common::Rng rng(3);
  for (int i = 0; i < 9; ++i) f.c_mean.push_back(static_cast<float>(rng.Normal()));
  for (int i = 0; i < 3; ++i) f.c_value.push_back(static_cast<float>(rng.Normal()));
  for (int i = 0; i < 3; ++i) f.c_std.push_back(static_cast<float>(rng.Normal()));
  f.Eval(*ac, obs);
  ac->ZeroGrad();
  ASSERT_TRUE(ac->Backward(f.c_mean.data(), f.c_std.data(), f.c_value.data()).ok());

  // Check the largest gradient entries of every trunk tensor and every head entry.
  auto check = [&](float* p, float analytic, const std::string& what) {
    const float keep = *p, h = 1e-2f;
    *p = keep + h;
    const double up = f.Eval(*ac, obs);
    *p = keep - h;
    const double down = f.Eval(*ac, obs);
    *p = keep;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic, numeric, 2e-2 * std::max(1.0, std::abs(numeric))) << what;
  };
  PolicyTransformer& trunk = ac->trunk();
  for (const ParamTensor& t : trunk.layout().tensors()) {
    if (t.name.starts_with("action_head")) {
      for (size_t i = 0; i < t.size; ++i) EXPECT_EQ(trunk.grads()[t.offset + i], 0.0f);
      continue;
    }
    size_t best = 0;
    for (size_t i = 1; i < t.size; ++i) {
      if (std::abs(trunk.grads()[t.offset + i]) > std::abs(trunk.grads()[t.offset + best])) {
        best = i;
      }
    }
    check(trunk.params() + t.offset + best, trunk.grads()[t.offset + best], t.name);
  }
  const std::vector<float> head_grads = ac->head_grads();
  for (size_t i = 0; i < ac->heads().size(); i += 5) {
    check(ac->heads().data() + i, head_grads[i], "heads[" + std::to_string(i) + "]");
  }
}

TEST(ActorCriticTest, TheMeanHeadStartsAsTheFlowHeadsOneStepPrediction) {
  auto ac = std::move(*ActorCritic::Create(TinyConfig(), 9, -1.0f));
  const auto obs = Observations(4, 0);
  ASSERT_TRUE(ac->Forward(obs).ok());
  // The trunk's own flow head on the same batch: velocity of each sample's first action token
  // (rows of velocity() are action tokens in slot order, action_horizon per sample).
  const float* v = ac->trunk().velocity();
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(ac->mean()[i * 3 + j], v[i * 2 * 3 + j], 1e-5);
  }
  for (int j = 0; j < 3; ++j) EXPECT_EQ(ac->log_std()[j], -1.0f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ac->value()[i], 0.0f);  // value head starts at 0
}

TEST(ActorCriticTest, LoadsTheTrunkFromABehaviourCloningCheckpoint) {
  const PolicyConfig c = TinyConfig();
  auto bc = std::move(*PolicyTransformer::Create(c));
  bc->Init(123);
  CheckpointData ck;
  ck.params.assign(bc->params(), bc->params() + bc->num_params());
  ck.adam_m.assign(ck.params.size(), 0.0f);
  ck.adam_v.assign(ck.params.size(), 0.0f);
  ck.config["model"] = ModelJson(c, bc->num_params());
  // Through the file format, as a job reads it.
  auto decoded = DecodeCheckpoint(EncodeCheckpoint(ck));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();

  auto ac = std::move(*ActorCritic::Create(c, 1, -0.5f));
  ASSERT_TRUE(ac->LoadTrunk(*decoded).ok());
  EXPECT_TRUE(std::equal(bc->params(), bc->params() + bc->num_params(), ac->trunk().params()));
  const float* w = bc->param("action_head.weight");
  EXPECT_TRUE(std::equal(w, w + c.action_dim * c.d_model, ac->heads().begin()));

  PolicyConfig other = c;
  other.d_model = 32;
  other.heads = 4;
  auto wrong = std::move(*ActorCritic::Create(other, 1, -0.5f));
  const common::Status s = wrong->LoadTrunk(*decoded);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("different model"), std::string::npos);
}

}  // namespace
}  // namespace engine
