// DatasetSource: how a dataset directory's keys become the policy's tokens (images → 8×8
// patches, proprio → normalised state tokens, actions → a normalised chunk, language →
// hashed ids), its token counts, and its refusals.
#include "engine/batches/dataset_source.h"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/testing/reach_hdf5.h"
#include "storage/testing/robomimic_file.h"

namespace engine {
namespace {

PolicyConfig Model(int action_dim = 7, int horizon = 4) {
  PolicyConfig c;
  c.d_model = 32;
  c.layers = 1;
  c.heads = 4;
  c.mlp = 64;
  c.action_dim = action_dim;
  c.action_horizon = horizon;
  return c;
}

class DatasetSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = storage::testing::MakeTempDir("dataset_source_test"); }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST(ImageToPatchesTest, AreaResizeAndPatchLayout) {
  // A 16×16 RGB image whose pixel (y, x) is (y·16 + x, 2x, 255 − y) downsized to 8×8: each
  // output pixel is the mean of a 2×2 block, one patch of 8×8, HWC.
  std::vector<uint8_t> img(16 * 16 * 3);
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      img[(y * 16 + x) * 3 + 0] = static_cast<uint8_t>(y * 16 + x);
      img[(y * 16 + x) * 3 + 1] = static_cast<uint8_t>(2 * x);
      img[(y * 16 + x) * 3 + 2] = static_cast<uint8_t>(255 - y);
    }
  }
  std::vector<float> p(kPatchDim);
  ImageToPatches(img.data(), 16, 16, 3, 8, p.data());
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) {
      const double r = (2 * y * 16 + 2 * x + 0.5 + 8) / 255.0;  // mean of the block
      const double g = (4 * x + 1) / 255.0;
      const double b = (255 - 2 * y - 0.5) / 255.0;
      EXPECT_NEAR(p[(y * 8 + x) * 3 + 0], r, 1e-6) << y << "," << x;
      EXPECT_NEAR(p[(y * 8 + x) * 3 + 1], g, 1e-6);
      EXPECT_NEAR(p[(y * 8 + x) * 3 + 2], b, 1e-6);
    }
  }
  // Upsizing a 1×1 grey pixel to 16×16: 4 patches, all the same value on every channel.
  const uint8_t grey = 51;
  std::vector<float> up(4 * kPatchDim);
  ImageToPatches(&grey, 1, 1, 1, 16, up.data());
  for (float v : up) EXPECT_NEAR(v, 0.2, 1e-6);
  // Non-square 84×60 to 32: every output is a proper average (a constant image stays constant).
  std::vector<uint8_t> flat(84 * 60 * 4, 200);
  std::vector<float> fp(16 * kPatchDim);
  ImageToPatches(flat.data(), 84, 60, 4, 32, fp.data());
  for (float v : fp) EXPECT_NEAR(v, 200.0 / 255.0, 1e-5);
}

TEST(HashLanguageTest, DeterministicPerWordAndCapped) {
  auto a = HashLanguage("Pick  up the\tBowl", 64, 512);
  auto b = HashLanguage("pick up THE bowl", 64, 512);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);  // case and spacing do not matter
  for (int id : a) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 512);
  }
  EXPECT_NE(a[0], a[1]);
  EXPECT_EQ(HashLanguage("a b c d e", 3, 512).size(), 3u);
  EXPECT_TRUE(HashLanguage("   ", 64, 512).empty());
}

TEST_F(DatasetSourceTest, SamplesCarryNormalisedStateActionsAndPatches) {
  testing::ReachHdf5Spec spec;
  spec.demos = 3;
  spec.frames = 10;
  spec.language = "reach the red blob";
  auto dir = testing::MakeReachDataset(root_, spec);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  api::DataOptions data;
  data.image_size = 32;
  auto src = DatasetSource::Open(*dir, data, Model(), 512);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const DatasetSource& s = **src;
  EXPECT_EQ(s.camera_keys(), std::vector<std::string>{"obs/agentview_image"});
  EXPECT_EQ(s.proprio_keys(), (std::vector<std::string>{"obs/robot0_eef_pos", "obs/robot0_eef_quat",
                                                        "obs/robot0_gripper_qpos"}));
  // The import counted 84/14 = 6×6 patches and 16 actions; the loader makes 4×4 and 4: recomputed.
  EXPECT_FALSE(s.index_counts_checked());
  ASSERT_EQ(s.sample_tokens().size(), 30u);
  for (int32_t t : s.sample_tokens()) EXPECT_EQ(t, 4 + 16 + 1 + 4);

  // Every sample: the tokens it says, state and actions normalised (over the dataset, the
  // per-dimension means are ~0 and the spread ~1), patches in [0, 1].
  std::vector<double> sum(7, 0.0), sq(7, 0.0);
  double state_sum = 0.0;
  for (uint64_t i = 0; i < 30; ++i) {
    PolicySample p;
    ASSERT_TRUE(s.MakeSample(i, 100 + i, &p).ok());
    EXPECT_EQ(p.NumTokens(4), 25);
    EXPECT_EQ(p.language, HashLanguage("reach the red blob", 64, Model().vocab));
    ASSERT_EQ(p.patches.size(), 16u * kPatchDim);
    for (float v : p.patches) {
      ASSERT_GE(v, 0.0f);
      ASSERT_LE(v, 1.0f);
    }
    ASSERT_EQ(p.states.size(), static_cast<size_t>(kStateDim));
    for (int j = 9; j < kStateDim; ++j) EXPECT_EQ(p.states[j], 0.0f);  // 3 + 4 + 2 used
    state_sum += p.states[0];
    ASSERT_EQ(p.actions.size(), 4u * 7);
    ASSERT_EQ(p.noise.size(), 4u * 7);
    for (int j = 0; j < 7; ++j) {
      sum[j] += p.actions[j];
      sq[j] += p.actions[j] * p.actions[j];
    }
  }
  for (int j = 0; j < 7; ++j) {
    EXPECT_NEAR(sum[j] / 30, 0.0, 1e-4) << j;
    const double var = sq[j] / 30;
    EXPECT_TRUE(var < 1e-6 || std::abs(var - 1.0) < 1e-3) << j << " var " << var;
  }
  EXPECT_NEAR(state_sum / 30, 0.0, 1e-4);

  // The last frame of an episode repeats its last action to fill the chunk.
  PolicySample last;
  ASSERT_TRUE(s.MakeSample(9, 1, &last).ok());
  for (int h = 1; h < 4; ++h) {
    for (int j = 0; j < 7; ++j) EXPECT_EQ(last.actions[h * 7 + j], last.actions[j]);
  }
  // Same sample, same seed: bitwise the same; another seed: other noise.
  PolicySample a, b, c;
  ASSERT_TRUE(s.MakeSample(5, 7, &a).ok());
  ASSERT_TRUE(s.MakeSample(5, 7, &b).ok());
  ASSERT_TRUE(s.MakeSample(5, 8, &c).ok());
  EXPECT_EQ(a.patches, b.patches);
  EXPECT_EQ(a.noise, b.noise);
  EXPECT_EQ(a.actions, c.actions);
  EXPECT_NE(a.noise, c.noise);
}

TEST_F(DatasetSourceTest, IndexCountsAreCheckedWhenTheMappingsAgree) {
  testing::ReachHdf5Spec spec;
  spec.demos = 2;
  spec.frames = 6;
  storage::TokenMapping m;
  m.patch_size = 14;  // 84 / 14 = 6 patches a side, as image_size 48 / 8
  m.action_horizon = 4;
  auto dir = testing::MakeReachDataset(root_, spec, 256, 16 << 10, m);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  api::DataOptions data;
  data.image_size = 48;
  auto src = DatasetSource::Open(*dir, data, Model(), 512);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_TRUE((*src)->index_counts_checked());
  for (uint64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(static_cast<uint32_t>((*src)->sample_tokens()[i]), (*src)->dataset().SampleTokens(i));
  }
}

TEST_F(DatasetSourceTest, AWideStateTakesSeveralTokens) {
  testing::ReachHdf5Spec spec;
  spec.demos = 2;
  spec.frames = 6;
  auto dir = testing::MakeReachDataset(root_, spec);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  api::DataOptions data;
  data.image_size = 32;
  const std::vector<std::string> nine = {"obs/robot0_eef_pos", "obs/robot0_eef_quat",
                                         "obs/robot0_gripper_qpos"};
  data.proprio = nine;
  data.proprio.insert(data.proprio.end(), nine.begin(), nine.end());  // 18 values
  auto src = DatasetSource::Open(*dir, data, Model(), 512);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  for (int32_t t : (*src)->sample_tokens()) EXPECT_EQ(t, 16 + 2 + 4);  // no language here
  PolicySample p;
  ASSERT_TRUE((*src)->MakeSample(3, 1, &p).ok());
  EXPECT_EQ(p.state_tokens, 2);
  EXPECT_EQ(p.NumTokens(4), 22);
  ASSERT_EQ(p.states.size(), 2u * kStateDim);
  for (int j = 0; j < 9; ++j) EXPECT_EQ(p.states[9 + j], p.states[j]) << j;
  for (int j = 18; j < 2 * kStateDim; ++j) EXPECT_EQ(p.states[j], 0.0f) << j;

  // The batch carries both tokens of the frame, in order, and the model takes it.
  std::vector<PolicySample> samples = {p, p};
  data::PackedRows plan;
  plan.budget = 64;
  plan.row_begin = {0, 2};
  plan.sample_index = {0, 1};
  plan.cu_seqlens = {0, 22, 44};
  plan.real_tokens = 44;
  auto batch = BuildPackedBatch(samples, plan, 4, 7);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->states.size(), 4u * kStateDim);
  EXPECT_EQ(batch->modality[16], static_cast<uint8_t>(Modality::kState));
  EXPECT_EQ(batch->modality[17], static_cast<uint8_t>(Modality::kState));
  EXPECT_EQ(batch->index[17], 1);
  EXPECT_EQ(batch->modality[18], static_cast<uint8_t>(Modality::kAction));
  EXPECT_TRUE(ValidateBatch(*batch, Model().vocab, Model().max_positions).ok());
}

TEST_F(DatasetSourceTest, RefusesWhatTheModelCannotTake) {
  testing::ReachHdf5Spec spec;
  spec.demos = 2;
  spec.frames = 6;
  auto dir = testing::MakeReachDataset(root_, spec);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  api::DataOptions data;
  auto expect = [&](const api::DataOptions& d, const PolicyConfig& m, int row,
                    const std::string& field, const std::string& text) {
    auto r = DatasetSource::Open(*dir, d, m, row);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().field(), field) << r.status().ToString();
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().ToString();
  };
  expect(data, Model(6), 512, "engine.model.action_dim", "actions have 7 dimensions");
  api::DataOptions wide = data;
  for (int i = 0; i < 8; ++i) {  // 8 × 9 = 72 values, more than 4 state tokens hold
    for (const char* k : {"obs/robot0_eef_pos", "obs/robot0_eef_quat", "obs/robot0_gripper_qpos"}) {
      wide.proprio.push_back(k);
    }
  }
  expect(wide, Model(), 512, "engine.data.proprio", "72 values, more than the 64 of 4 state tokens");
  api::DataOptions missing = data;
  missing.proprio = {"obs/joint_states"};
  expect(missing, Model(), 512, "engine.data.proprio", "obs/joint_states");
  api::DataOptions not_camera = data;
  not_camera.cameras = {"obs/robot0_eef_pos"};
  expect(not_camera, Model(), 512, "engine.data.cameras", "image keys: obs/agentview_image");
  api::DataOptions big = data;
  big.image_size = 128;  // 256 patches + 1 + 4 > a row of 200
  expect(big, Model(), 200, "engine.data.tokens_per_row", "episode 0 (demo_0)");
  auto absent = DatasetSource::Open(root_ + "/nope", data, Model(), 512);
  EXPECT_FALSE(absent.ok());
}

}  // namespace
}  // namespace engine
