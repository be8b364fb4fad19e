// The wire forms and the layout of rollout ranks (rollout_ranks.h); the ranks themselves run in
// rollout_ranks_mpi_test.cc.
#include "engine/rl/rollout_ranks.h"

#include <cstring>

#include <gtest/gtest.h>

#include "engine/model/policy_options.h"
#include "engine/testing/small_reach.h"

namespace engine::rl {
namespace {

Segment SampleSegment() {
  Segment s;
  s.env = 3;
  s.batch = 7;
  for (int t = 0; t < 2; ++t) {
    PolicySample o;
    o.language = {1, 2, 3 + t};
    o.frames = 1;
    o.cameras = 0;
    o.patches_per_camera = 16;
    o.states = {0.5f, -1.0f * t};
    o.time = 0.25f;
    s.obs.push_back(o);
    s.behaviour_logp.push_back(-1.5f + t);
    s.values.push_back(0.1f * t);
    s.rewards.push_back(1.0f);
    s.dones.push_back(static_cast<uint8_t>(t));
    s.versions.push_back(6 + t);
  }
  s.actions = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  s.last_obs = s.obs.back();
  s.last_obs.states = {9.0f, 8.0f};
  s.episodes = 1;
  s.successes = 1;
  s.returns = 2.5;
  return s;
}

TEST(RolloutWireTest, SegmentRoundTrips) {
  const Segment s = SampleSegment();
  ActorTotals totals{123, 4, 40, 2};
  Segment back;
  ActorTotals totals_back;
  ASSERT_TRUE(DecodeSegment(EncodeSegment(s, totals), &back, &totals_back).ok());
  EXPECT_EQ(back.env, 3);
  EXPECT_EQ(back.batch, 7);
  ASSERT_EQ(back.obs.size(), 2u);
  EXPECT_EQ(back.obs[1].language, s.obs[1].language);
  EXPECT_EQ(back.obs[1].states, s.obs[1].states);
  EXPECT_EQ(back.obs[1].cameras, 0);
  EXPECT_EQ(back.actions, s.actions);
  EXPECT_EQ(back.behaviour_logp, s.behaviour_logp);
  EXPECT_EQ(back.dones, s.dones);
  EXPECT_EQ(back.versions, s.versions);
  EXPECT_EQ(back.last_obs.states, s.last_obs.states);
  EXPECT_EQ(back.returns, 2.5);
  EXPECT_EQ(totals_back.wait_ns, 123);
  EXPECT_EQ(totals_back.inferred, 40);
  EXPECT_EQ(totals_back.env_threads, 2);
}

TEST(RolloutWireTest, EveryTruncationAndATrailingByteAreRefused) {
  const std::string bytes = EncodeSegment(SampleSegment(), ActorTotals{});
  Segment back;
  ActorTotals t;
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeSegment(bytes.substr(0, n), &back, &t).ok()) << n;
  }
  EXPECT_FALSE(DecodeSegment(bytes + "x", &back, &t).ok());
  // A step count larger than the message cannot make the decoder allocate it.
  std::string huge = bytes;
  const size_t steps_at = 1 + 8 * 3 + 4 * 2 + 8;
  const uint64_t lie = uint64_t{1} << 60;
  std::memcpy(huge.data() + steps_at, &lie, sizeof(lie));
  EXPECT_FALSE(DecodeSegment(huge, &back, &t).ok());
}

TEST(RolloutWireTest, WeightsRoundTrip) {
  api::EngineOptions e = testing::SmallReach(1024).engine;
  auto config = PolicyConfigFromOptions(e);
  ASSERT_TRUE(config.ok());
  auto policy = ActorCritic::Create(*config, 9, -0.5f);
  ASSERT_TRUE(policy.ok());
  std::vector<float> trunk, heads;
  int64_t version = 0;
  const std::string bytes = EncodeWeights(**policy, 42);
  ASSERT_TRUE(DecodeWeights(bytes, &trunk, &heads, &version).ok());
  EXPECT_EQ(version, 42);
  ASSERT_EQ(trunk.size(), (*policy)->trunk().num_params());
  EXPECT_EQ(std::memcmp(trunk.data(), (*policy)->trunk().params(), trunk.size() * sizeof(float)),
            0);
  EXPECT_EQ(heads, (*policy)->heads());
  EXPECT_FALSE(DecodeWeights(bytes.substr(0, bytes.size() - 1), &trunk, &heads, &version).ok());
}

TEST(RolloutLayoutTest, LearnersComeFirstAndServeEqualShares) {
  auto l = RolloutLayout::For(6, 4);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->learners, 2);
  EXPECT_EQ(l->per_learner, 2);
  EXPECT_TRUE(l->IsLearner(1));
  EXPECT_FALSE(l->IsLearner(2));
  EXPECT_EQ(l->LearnerOf(2), 0);
  EXPECT_EQ(l->LearnerOf(3), 0);
  EXPECT_EQ(l->LearnerOf(5), 1);
  EXPECT_EQ(l->FirstRolloutOf(1), 4);
  EXPECT_FALSE(RolloutLayout::For(2, 2).ok()) << "no learner";
  EXPECT_FALSE(RolloutLayout::For(5, 3).ok()) << "3 rollout ranks over 2 learners";
  EXPECT_FALSE(RolloutLayout::For(4, 0).ok());
}

}  // namespace
}  // namespace engine::rl
