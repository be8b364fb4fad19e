// Checkpoint and resume under MPI (part of engine_mpi_test, run under mpirun -np 2): a run
// stopped halfway and resumed matches the straight run exactly, and a checkpoint resumes on a
// different number of ranks, continuing the same global sample stream.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "engine/dist/mpi_communicator.h"
#include "engine/format/checkpoint.h"
#include "engine/train/trainer.h"
#include "engine/batches/train_batches.h"

namespace engine {
namespace {

constexpr int kSteps = 20;
constexpr int kRows = 2;      // packed rows of 512 per rank, on 2 ranks
constexpr int kSamples = 13;  // per rank: floor(2 · 512 / (72 + 4)); 4 rows hold exactly 26

TrainerOptions SmallRun(int rows) {
  TrainerOptions o;
  o.engine.model.d_model = 32;
  o.engine.model.layers = 2;
  o.engine.model.heads = 4;
  o.engine.model.mlp = 64;
  o.engine.model.action_horizon = 4;
  o.engine.data.rows_per_step = rows;
  o.engine.optim.lr = 3e-3;
  o.engine.optim.steps = kSteps;
  o.engine.optim.warmup_steps = 3;
  o.engine.checkpoint.every_steps = kSteps / 2;
  o.engine.checkpoint.keep = 10;
  o.engine.seed = 4;
  o.print_progress = false;
  o.grad_bucket_bytes = 8 * 1024;  // several buckets even for this small model
  return o;
}

// ‖a − b‖ / ‖b‖. (Not per element: AdamW normalises each update, so entries whose gradients are
// rounding noise move by about lr whichever way the noise falls.)
double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0.0, nb = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    nb += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / nb);
}

class MpiResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MpiCommunicator comm;
    std::string dir;
    if (comm.rank() == 0) {
      dir = (std::filesystem::temp_directory_path() /
             ("embody-mpi-resume-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
      std::filesystem::remove_all(dir);
    }
    comm.BroadcastBytes(&dir, 0);  // every rank knows rank 0's directory (one machine here)
    dir_ = dir;
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (MpiCommunicator().rank() == 0) std::filesystem::remove_all(dir_);
  }
  std::string Dir(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(MpiResumeTest, HalfwayCheckpointResumesExactlyAndOnOtherRankCounts) {
  MpiCommunicator comm;
  ASSERT_EQ(comm.world_size(), 2) << "run under mpirun -np 2";
  TrainerOptions straight = SmallRun(kRows);
  straight.checkpoint_dir = Dir("straight");
  auto full = Train(straight, comm, nullptr);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const std::string half = CheckpointPath(Dir("straight"), kSteps / 2);
  ASSERT_EQ(SamplesPerRank(straight.engine), kSamples);
  ASSERT_EQ(SamplesPerRank(SmallRun(2 * kRows).engine), 2 * kSamples);
  ASSERT_EQ(full->next_sample, uint64_t{kSteps} * kSamples * 2);

  // Same two ranks: bitwise the straight run.
  TrainerOptions resumed = SmallRun(kRows);
  resumed.resume_from = half;
  auto r2 = Train(resumed, comm, nullptr);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->first_step, kSteps / 2);
  ASSERT_EQ(r2->losses.size(), size_t{kSteps / 2});
  for (int i = 0; i < kSteps / 2; ++i) {
    EXPECT_NEAR(r2->losses[i], full->losses[kSteps / 2 + i], 1e-6) << "step " << i;
  }
  EXPECT_EQ(r2->params, full->params);
  EXPECT_EQ(r2->next_sample, full->next_sample);

  if (comm.rank() == 0) {
    LocalCommunicator one;
    // One rank with twice the rows: the same global batches, so the same run up to float
    // reduction order (the gradient is the same global per-token mean).
    TrainerOptions doubled = SmallRun(2 * kRows);
    doubled.resume_from = half;
    auto r1 = Train(doubled, one, nullptr);
    ASSERT_TRUE(r1.ok()) << r1.status().ToString();
    ASSERT_EQ(r1->losses.size(), size_t{kSteps / 2});
    for (int i = 0; i < kSteps / 2; ++i) {
      EXPECT_NEAR(r1->losses[i], full->losses[kSteps / 2 + i], 1e-4 * full->losses[kSteps / 2 + i])
          << "step " << i;
    }
    EXPECT_LT(RelDiff(r1->params, full->params), 1e-3);
    EXPECT_EQ(r1->next_sample, full->next_sample);

    // One rank with the same rows per rank: half the global batch, continuing the stream from
    // the checkpoint's position.
    TrainerOptions same_rows = SmallRun(kRows);
    same_rows.resume_from = half;
    auto r1b = Train(same_rows, one, nullptr);
    ASSERT_TRUE(r1b.ok()) << r1b.status().ToString();
    EXPECT_EQ(r1b->next_sample,
              uint64_t{kSteps / 2} * kSamples * 2 + uint64_t{kSteps / 2} * kSamples);
    for (float l : r1b->losses) EXPECT_TRUE(std::isfinite(l));
    EXPECT_LT(r1b->losses.back(), full->losses.front());
  }

  // The other way: a checkpoint written by one rank (rank 0 alone) resumed on two.
  std::string one_rank_half;
  std::vector<float> one_rank_losses;
  if (comm.rank() == 0) {
    LocalCommunicator one;
    TrainerOptions single = SmallRun(2 * kRows);
    single.checkpoint_dir = Dir("single");
    auto s = Train(single, one, nullptr);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    one_rank_losses = s->losses;
    one_rank_half = CheckpointPath(Dir("single"), kSteps / 2);
  }
  comm.BroadcastBytes(&one_rank_half, 0);
  one_rank_losses.resize(kSteps);
  MPI_Bcast(one_rank_losses.data(), kSteps, MPI_FLOAT, 0, MPI_COMM_WORLD);
  TrainerOptions onto_two = SmallRun(kRows);
  onto_two.resume_from = one_rank_half;
  auto r12 = Train(onto_two, comm, nullptr);
  ASSERT_TRUE(r12.ok()) << r12.status().ToString();
  for (int i = 0; i < kSteps / 2; ++i) {
    EXPECT_NEAR(r12->losses[i], one_rank_losses[kSteps / 2 + i],
                1e-4 * one_rank_losses[kSteps / 2 + i])
        << "step " << i;
  }
}

TEST_F(MpiResumeTest, UnreadableCheckpointFailsOnEveryRank) {
  MpiCommunicator comm;
  TrainerOptions o = SmallRun(kRows);
  o.resume_from = Dir("missing.ckpt");  // rank 0 cannot read it; rank 1 must not hang
  auto r = Train(o, comm, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kNotFound);
}

}  // namespace
}  // namespace engine
