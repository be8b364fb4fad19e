// The trainer on a dataset directory (engine.data.dataset "dir:..."): a robomimic-layout HDF5
// file written by the test and imported through storage's importer is learned (the loss falls),
// a resumed run takes exactly the straight run's batches across epoch boundaries, and a flipped
// byte in a shard fails the run with the shard file and episode named.
#include <filesystem>
#include <fstream>
#include <numeric>

#include <gtest/gtest.h>

#include "engine/format/checkpoint.h"
#include "engine/testing/reach_hdf5.h"
#include "engine/testing/small_run.h"
#include "engine/train/trainer.h"
#include "storage/manifest.h"
#include "storage/testing/episodes.h"
#include "storage/testing/robomimic_file.h"

namespace engine {
namespace {

using testing::Mean;

class DatasetTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = storage::testing::MakeTempDir("dataset_train_test");
    testing::ReachHdf5Spec spec;  // 16 demos × 24 frames = 384 samples, 16 shards
    auto dir = testing::MakeReachDataset(root_, spec);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    dataset_ = *dir;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // A small policy on two packed rows of 256 tokens per step: samples are 4 language + 16
  // patches + 1 state + 4 actions = 25 tokens, so 20 samples a step and an epoch every ~19 steps.
  TrainerOptions Run(int steps) const {
    TrainerOptions o;
    o.engine.model.d_model = 48;
    o.engine.model.layers = 2;
    o.engine.model.heads = 4;
    o.engine.model.mlp = 96;
    o.engine.model.action_horizon = 4;
    o.engine.model.action_dim = 7;
    o.engine.data.dataset = "dir:" + dataset_;
    o.engine.data.language = "reach the red blob";
    o.engine.data.rows_per_step = 2;
    o.engine.data.tokens_per_row = 256;
    o.engine.optim.lr = 3e-3;
    o.engine.optim.steps = steps;
    o.engine.optim.warmup_steps = 10;
    o.engine.seed = 3;
    o.print_progress = false;
    return o;
  }

  std::string root_, dataset_;
};

TEST_F(DatasetTrainTest, LossFallsOnAnImportedRobomimicFile) {
  LocalCommunicator comm;
  auto r = Train(Run(120), comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->losses.size(), 120u);
  const double first = Mean(r->losses, 0, 10), last = Mean(r->losses, 110, 120);
  EXPECT_LT(last, 0.6 * first) << "first " << first << " last " << last;
  // 120 steps × 20 samples over 384 samples: six epochs and a quarter.
  EXPECT_EQ(r->next_sample, 120u * 20);
  EXPECT_EQ(r->epoch, 2400u / 384);
  EXPECT_EQ(r->in_epoch, 2400u % 384);
}

TEST_F(DatasetTrainTest, ResumedRunTakesTheStraightRunsBatchesAcrossEpochs) {
  LocalCommunicator comm;
  TrainerOptions straight = Run(40);
  straight.checkpoint_dir = root_ + "/straight";
  straight.engine.checkpoint.every_steps = 10;
  straight.engine.checkpoint.keep = 10;
  auto full = Train(straight, comm, nullptr);
  ASSERT_TRUE(full.ok()) << full.status().ToString();

  // Step 30 lies in the second epoch (600 samples of 384 consumed).
  auto ck = LoadCheckpoint(CheckpointPath(straight.checkpoint_dir, 30));
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->data.next_sample, 600u);
  EXPECT_EQ(ck->data.epoch, 1u);
  EXPECT_EQ(ck->data.in_epoch, 600u - 384);
  EXPECT_EQ(ck->data.dataset_samples, 384u);
  EXPECT_NE(ck->data.dataset_fingerprint, 0u);

  for (int at : {10, 30}) {
    TrainerOptions resumed = Run(40);
    resumed.resume_from = CheckpointPath(straight.checkpoint_dir, at);
    auto r = Train(resumed, comm, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->losses.size(), size_t(40 - at));
    for (int i = 0; i < 40 - at; ++i) {
      EXPECT_EQ(r->losses[i], full->losses[at + i]) << "from " << at << " step " << i;
    }
    EXPECT_EQ(r->params, full->params);
    EXPECT_EQ(r->next_sample, full->next_sample);
  }

  // Another dataset (here: the same episodes re-imported with another shard size, so other shard
  // files) is refused: the position counts in the first one's order.
  std::filesystem::create_directories(root_ + "/other");
  auto other = testing::MakeReachDataset(root_ + "/other", testing::ReachHdf5Spec{}, 1024);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  TrainerOptions elsewhere = Run(40);
  elsewhere.engine.data.dataset = "dir:" + *other;
  elsewhere.resume_from = CheckpointPath(straight.checkpoint_dir, 30);
  auto refused = Train(elsewhere, comm, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("but the job trains on a dataset"), std::string::npos)
      << refused.status().ToString();
}

TEST_F(DatasetTrainTest, FlippedByteFailsTheRunNamingTheShardAndEpisode) {
  auto manifest = storage::ReadManifest(dataset_);
  ASSERT_TRUE(manifest.ok());
  const std::string shard = dataset_ + "/" + manifest->shards[3].file;
  // Inside the first key's data of the shard's only episode (data starts at byte 64).
  storage::testing::FlipByte(shard, 64 + 100);
  LocalCommunicator comm;
  bool on_every_rank = false;
  auto r = Train(Run(40), comm, nullptr, &on_every_rank);  // two epochs: every sample is read
  ASSERT_FALSE(r.ok());
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find(shard), std::string::npos) << msg;
  EXPECT_NE(msg.find("episode 0 (demo_3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
  EXPECT_TRUE(on_every_rank);
}

TEST_F(DatasetTrainTest, DatasetThatCannotBeOpenedFailsBeforeTraining) {
  LocalCommunicator comm;
  TrainerOptions o = Run(5);
  o.engine.data.dataset = "dir:" + root_ + "/missing";
  auto r = Train(o, comm, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(root_ + "/missing"), std::string::npos)
      << r.status().ToString();
  // The model's action_dim must match the dataset's.
  TrainerOptions wrong = Run(5);
  wrong.engine.model.action_dim = 6;
  auto w = Train(wrong, comm, nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().field(), "engine.model.action_dim");
}

}  // namespace
}  // namespace engine
