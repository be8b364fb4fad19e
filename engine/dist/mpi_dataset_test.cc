// Training on a dataset directory under MPI (part of engine_mpi_test, run under mpirun -np 2):
// a checkpoint of a 2-rank run resumes on 2 ranks bitwise and on 1 rank with the same global
// batch to float rounding, and a flipped byte that only some ranks read ends the run on both
// ranks (no hang), the reading rank naming the shard file and episode.
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "engine/dist/mpi_communicator.h"
#include "engine/format/checkpoint.h"
#include "engine/testing/reach_hdf5.h"
#include "engine/train/trainer.h"
#include "storage/manifest.h"
#include "storage/testing/episodes.h"

namespace engine {
namespace {

constexpr int kSteps = 24;

class MpiDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MpiCommunicator comm;
    std::string dir, dataset;
    if (comm.rank() == 0) {
      dir = (std::filesystem::temp_directory_path() /
             ("embody-mpi-dataset-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      auto made = testing::MakeReachDataset(dir, testing::ReachHdf5Spec{});
      dataset = made.ok() ? *made : "";
      EXPECT_TRUE(made.ok()) << made.status().ToString();
    }
    comm.BroadcastBytes(&dir, 0);
    comm.BroadcastBytes(&dataset, 0);
    dir_ = dir;
    dataset_ = dataset;
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (MpiCommunicator().rank() == 0) std::filesystem::remove_all(dir_);
  }

  // 20 samples of 25 tokens per 2 rows of 256: 40 a step on 2 ranks, an epoch (384) in ~10.
  TrainerOptions Run(int rows) const {
    TrainerOptions o;
    o.engine.model.d_model = 32;
    o.engine.model.layers = 2;
    o.engine.model.heads = 4;
    o.engine.model.mlp = 64;
    o.engine.model.action_horizon = 4;
    o.engine.data.dataset = "dir:" + dataset_;
    o.engine.data.language = "reach the red blob";  // 4 words
    o.engine.data.rows_per_step = rows;
    o.engine.data.tokens_per_row = 256;
    o.engine.optim.lr = 3e-3;
    o.engine.optim.steps = kSteps;
    o.engine.optim.warmup_steps = 3;
    o.engine.checkpoint.every_steps = kSteps / 2;
    o.engine.checkpoint.keep = 10;
    o.engine.seed = 11;
    o.print_progress = false;
    o.grad_bucket_bytes = 8 * 1024;
    return o;
  }

  std::string dir_, dataset_;
};

TEST_F(MpiDatasetTest, CheckpointResumesOnTheSameAndOnAnotherRankCount) {
  MpiCommunicator comm;
  ASSERT_EQ(comm.world_size(), 2) << "run under mpirun -np 2";
  ASSERT_FALSE(dataset_.empty());
  TrainerOptions straight = Run(2);
  straight.checkpoint_dir = dir_ + "/straight";
  auto full = Train(straight, comm, nullptr);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_EQ(full->next_sample, uint64_t{kSteps} * 40);
  const std::string half = CheckpointPath(straight.checkpoint_dir, kSteps / 2);

  TrainerOptions resumed = Run(2);
  resumed.resume_from = half;
  auto r2 = Train(resumed, comm, nullptr);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_EQ(r2->losses.size(), size_t{kSteps / 2});
  for (int i = 0; i < kSteps / 2; ++i) EXPECT_EQ(r2->losses[i], full->losses[kSteps / 2 + i]);
  EXPECT_EQ(r2->params, full->params);

  if (comm.rank() == 0) {
    // One rank with twice the rows: the same 40 samples a step (the same global batches), so the
    // same run up to float reduction order.
    LocalCommunicator one;
    TrainerOptions doubled = Run(4);
    doubled.resume_from = half;
    auto r1 = Train(doubled, one, nullptr);
    ASSERT_TRUE(r1.ok()) << r1.status().ToString();
    ASSERT_EQ(r1->losses.size(), size_t{kSteps / 2});
    for (int i = 0; i < kSteps / 2; ++i) {
      EXPECT_NEAR(r1->losses[i], full->losses[kSteps / 2 + i], 1e-4 * full->losses[kSteps / 2 + i])
          << "step " << i;
    }
    EXPECT_EQ(r1->next_sample, full->next_sample);
    EXPECT_EQ(r1->epoch, full->epoch);
    EXPECT_EQ(r1->in_epoch, full->in_epoch);
  }
}

TEST_F(MpiDatasetTest, FlippedByteEndsTheRunOnEveryRank) {
  MpiCommunicator comm;
  ASSERT_FALSE(dataset_.empty());
  std::string shard;
  if (comm.rank() == 0) {
    auto m = storage::ReadManifest(dataset_);
    ASSERT_TRUE(m.ok());
    shard = dataset_ + "/" + m->shards[5].file;
    storage::testing::FlipByte(shard, 64 + 10);  // actions of demo_5
  }
  comm.BroadcastBytes(&shard, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  bool on_every_rank = false;
  auto r = Train(Run(2), comm, nullptr, &on_every_rank);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(on_every_rank);
  // Whichever rank read the chunk names it; the other says which rank failed.
  const std::string msg = r.status().message();
  const bool names_file =
      msg.find(shard) != std::string::npos && msg.find("episode 0 (demo_5)") != std::string::npos;
  const bool names_rank = msg.find("stopped: rank ") != std::string::npos;
  EXPECT_TRUE(names_file || names_rank) << msg;
  const double named = comm.AllreduceSum(names_file ? 1.0 : 0.0);
  EXPECT_GE(named, 1.0);
}

}  // namespace
}  // namespace engine
