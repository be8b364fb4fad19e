#include "engine/model/packed_batch.h"

#include <gtest/gtest.h>

#include "api/job_spec.h"
#include "engine/data/embodied_lengths.h"
#include "engine/model/flow_matching.h"
#include "engine/model/policy_transformer.h"
#include "engine/model/sample_fixtures.h"

namespace engine {
namespace {

constexpr int kPackHorizon = 4, kPackActionDim = 3, kVocab = 32;

TEST(PackedBatchTest, BuildsTheDocumentedLayout) {
  common::Rng rng(1);
  auto samples =
      testing::RandomSamples(rng, {{2, 1, 1}, {1, 2, 1}}, kVocab, kPackHorizon, kPackActionDim, 2);
  // sample 0: 2 language + (2 patches + 1 state) + 4 actions = 9; sample 1: 1 + 2·3 + 4 = 11.
  auto lengths = testing::Lengths(samples, kPackHorizon);
  ASSERT_EQ(lengths, (std::vector<int32_t>{9, 11}));
  auto plan = data::PackBestFitDecreasing(lengths, 24);
  ASSERT_TRUE(plan.ok());
  auto b = BuildPackedBatch(samples, *plan, kPackHorizon, kPackActionDim);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(ValidateBatch(*b, kVocab, 64).ok());
  EXPECT_EQ(b->rows, 1);
  EXPECT_EQ(b->num_samples(), 2);
  EXPECT_EQ(b->RowTokens(0), 20);
  EXPECT_EQ(b->num_actions(), 2 * kPackHorizon);
  EXPECT_EQ(b->patches.size(), 6u * kPatchDim);
  EXPECT_EQ(b->states.size(), 3u * kStateDim);
  // Best-fit decreasing places the longer sample (1) first.
  const PolicySample& first = samples[plan->sample_index[0]];
  EXPECT_EQ(b->modality[0], static_cast<uint8_t>(Modality::kLanguage));
  EXPECT_EQ(b->index[0], first.language[0]);
  EXPECT_EQ(b->modality[1], static_cast<uint8_t>(Modality::kImage));
  EXPECT_EQ(b->modality[3], static_cast<uint8_t>(Modality::kState));
  EXPECT_EQ(b->modality[7], static_cast<uint8_t>(Modality::kAction));
  EXPECT_EQ(b->position[11], 0);  // second sample restarts positions
  EXPECT_EQ(b->sample[11], 1);
  EXPECT_EQ(b->modality[20], static_cast<uint8_t>(Modality::kPad));
  EXPECT_EQ(b->sample[23], -1);
  // x_t and the target follow the flow-matching definitions.
  const float t = first.time;
  EXPECT_FLOAT_EQ(b->noisy_action[0], (1 - t) * first.noise[0] + t * first.actions[0]);
  EXPECT_FLOAT_EQ(b->target_velocity[0], first.actions[0] - first.noise[0]);
  EXPECT_FLOAT_EQ(b->loss_weight[0], first.weight);
  EXPECT_NEAR(b->WeightTotal(),
              (samples[0].weight + samples[1].weight) * kPackHorizon * kPackActionDim, 1e-4);
}

TEST(PackedBatchTest, ValidationNamesTheProblem) {
  common::Rng rng(2);
  auto samples =
      testing::RandomSamples(rng, {{2, 1, 1}, {1, 2, 1}}, kVocab, kPackHorizon, kPackActionDim, 2);
  const PackedBatch good = testing::PackedBatchOf(samples, 24, kPackHorizon, kPackActionDim);
  ASSERT_TRUE(ValidateBatch(good, kVocab, 64).ok());
  auto bad = [&](auto mutate) {
    PackedBatch b = good;
    mutate(b);
    return ValidateBatch(b, kVocab, 64);
  };
  EXPECT_FALSE(bad([](PackedBatch& b) { b.position[12] = 5; }).ok());
  EXPECT_FALSE(bad([](PackedBatch& b) { b.index[0] = kVocab; }).ok());
  EXPECT_FALSE(bad([](PackedBatch& b) { b.index[1] = 1000; }).ok());
  EXPECT_FALSE(bad([](PackedBatch& b) { b.modality[21] = 1; }).ok());
  EXPECT_FALSE(bad([](PackedBatch& b) { b.cu_seqlens.back() = 25; }).ok());
  EXPECT_FALSE(bad([](PackedBatch& b) { b.time.pop_back(); }).ok());
  EXPECT_FALSE(bad([](PackedBatch& b) { b.loss_weight.push_back(1); }).ok());
  EXPECT_FALSE(ValidateBatch(good, kVocab, 10).ok());  // a sample longer than the positions
}

TEST(PackedBatchTest, RejectsBadSamplesAndPlans) {
  common::Rng rng(3);
  auto samples = testing::RandomSamples(rng, {{2, 1, 1}}, kVocab, kPackHorizon, kPackActionDim, 2);
  samples[0].states.pop_back();
  auto plan = OneSamplePerRow(testing::Lengths(samples, kPackHorizon), 16);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(BuildPackedBatch(samples, *plan, kPackHorizon, kPackActionDim).ok());
  EXPECT_FALSE(OneSamplePerRow(std::vector<int32_t>{17}, 16).ok());
}

TEST(FlowMatchingTest, TimeScheduleIsGr00tBeta) {
  common::Rng rng(4);
  double sum = 0.0;
  const int n = 200000;
  int below_half = 0;
  for (int i = 0; i < n; ++i) {
    const float t = SampleFlowTime(rng);
    ASSERT_GE(t, 0.0f);
    ASSERT_LE(t, 1.0f);
    sum += t;
    below_half += t < 0.5f;
  }
  // X ~ Beta(1.5, 1): E[X] = 0.6, P(X > 0.4995) = 1 − 0.4995^1.5.
  EXPECT_NEAR(sum / n, (0.999 - 0.6) / 0.999, 3e-3);
  EXPECT_NEAR(static_cast<double>(below_half) / n, 1.0 - std::pow(0.4995, 1.5), 5e-3);
}

// api/job_spec.cc validates specs against these limits without linking the engine.
TEST(PackedBatchTest, JobSpecLimitsMatchTheEngine) {
  EXPECT_EQ(api::kSimReachMaxContextTokens, data::EmbodiedLengthConfig().MaxTokens());
  EXPECT_EQ(api::kMaxPositions, PolicyConfig().max_positions);
  PolicyConfig c;
  c.d_model = 2 * api::kMaxHeadDim;
  c.heads = 2;
  EXPECT_TRUE(c.Validate().ok());
  c.heads = 1;
  EXPECT_FALSE(c.Validate().ok());
}

}  // namespace
}  // namespace engine
