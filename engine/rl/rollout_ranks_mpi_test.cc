// Level 1 across MPI ranks (rollout_ranks.h), run under mpirun with 2 and with 4 ranks (label
// mpi; main in engine/testing/mpi_test_main.cc): the last ranks act, the first learn.
#include <mpi.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "engine/dist/mpi_communicator.h"
#include "engine/rl/async_ppo.h"
#include "engine/testing/small_reach.h"

namespace engine::rl {
namespace {

// The tests' tiny reach with its actors on `rollout_ranks` ranks of their own.
SyncPpoOptions TinyRl(int rollout_ranks, int updates) {
  SyncPpoOptions o = testing::TinyReach(rollout_ranks, updates, 5);
  o.engine.rl.disaggregated = true;
  o.engine.rl.rollout_ranks = rollout_ranks;
  return o;
}

// True on every rank when `v` is bitwise the same on every rank of `comm`.
bool SameEverywhere(const std::vector<float>& v, MPI_Comm comm) {
  std::vector<float> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, comm);
  int same = std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, comm);
  return same == 1;
}

// One learner and the other ranks acting, every level on: every update learns all the rollout
// ranks' steps, never staler than η, and the learner's statistics see the actors' counters.
TEST(RolloutRanksTest, OneLearnerLearnsEveryRolloutRanksSteps) {
  MpiCommunicator comm;
  const int R = comm.world_size() - 1;
  SyncPpoOptions o = TinyRl(R, 4);
  o.engine.rl.env_latency.mean_ms = 0.5;
  o.engine.rl.env_latency.tail_probability = 0.1;
  o.engine.rl.max_staleness = 1;
  o.engine.rl.env_async = true;
  o.engine.rl.streaming = true;
  o.engine.rl.micro_batches = 2;
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  if (comm.rank() > 0) {
    EXPECT_TRUE(r->updates.empty()) << "a rollout rank learns nothing";
    return;
  }
  ASSERT_EQ(r->updates.size(), 4u);
  EXPECT_EQ(r->updates.back().env_steps, 4 * 8 * R * 4);
  for (const UpdateRecord& u : r->updates) {
    EXPECT_LE(u.max_staleness, 1);
    int64_t steps = 0;
    for (int64_t s : u.staleness) steps += s;
    EXPECT_EQ(steps, 4 * 8 * R) << "every step of every rollout rank, learned once";
    EXPECT_GT(u.inference_batch, 0.0) << "the rollout ranks' counters reach the learner";
  }
}

// η = 0 with one learner and one rollout rank is the colocated threads' run, bitwise: the
// same environments, noise and order of learning, only on another rank.
TEST(RolloutRanksTest, OneRolloutRankComputesWhatThreadsCompute) {
  MpiCommunicator comm;
  if (comm.world_size() != 2) GTEST_SKIP() << "a 2-rank case";
  SyncPpoOptions o = TinyRl(1, 3);
  o.engine.rl.max_staleness = 0;
  auto ranks = RunAsyncPpo(o, comm, nullptr);
  ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
  if (comm.rank() == 0) {
    SyncPpoOptions threads = o;
    threads.engine.rl.rollout_ranks = 0;
    LocalCommunicator one;
    auto local = RunAsyncPpo(threads, one, nullptr);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    ASSERT_EQ(ranks->updates.size(), local->updates.size());
    ASSERT_EQ(ranks->final_heads.size(), local->final_heads.size());
    EXPECT_EQ(std::memcmp(ranks->final_heads.data(), local->final_heads.data(),
                          local->final_heads.size() * sizeof(float)),
              0);
    for (size_t i = 0; i < local->updates.size(); ++i) {
      EXPECT_EQ(ranks->updates[i].ppo.value_loss, local->updates[i].ppo.value_loss) << i;
      EXPECT_EQ(ranks->updates[i].episodes, local->updates[i].episodes) << i;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Two learners, each with its own rollout ranks, average their gradients: their policies stay
// bitwise equal, and the statistics count both learners' rollout ranks.
TEST(RolloutRanksTest, TwoLearnersStayIdentical) {
  MpiCommunicator comm;
  if (comm.world_size() != 4) GTEST_SKIP() << "a 4-rank case";
  SyncPpoOptions o = TinyRl(2, 3);
  o.engine.rl.max_staleness = 1;
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  MPI_Comm learners;
  MPI_Comm_split(MPI_COMM_WORLD, comm.rank() < 2 ? 0 : 1, comm.rank(), &learners);
  if (comm.rank() < 2) {
    ASSERT_EQ(r->updates.size(), 3u);
    EXPECT_EQ(r->updates.back().env_steps, 4 * 8 * 2 * 3);
    EXPECT_TRUE(SameEverywhere(r->final_heads, learners));
    int64_t steps = 0;
    for (int64_t s : r->updates.back().staleness) steps += s;
    EXPECT_EQ(steps, 4 * 8 * 2);
  } else {
    EXPECT_TRUE(r->updates.empty());
  }
  MPI_Comm_free(&learners);
}

// A rollout rank that cannot act (here: no such task, which only acting ranks build) fails the
// run: its learner returns the rollout rank's error instead of waiting for trajectories, and
// every rank returns (the ending's handshake leaves nothing in flight).
TEST(RolloutRanksTest, ARolloutRanksFailureFailsItsLearner) {
  MpiCommunicator comm;
  SyncPpoOptions o = TinyRl(comm.world_size() - 1, 3);
  o.engine.rl.task = "no_such_task";
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_FALSE(r.ok());
  const std::string why = r.status().ToString();
  EXPECT_NE(why.find("no_such_task"), std::string::npos) << why;
  if (comm.rank() == 0) {
    EXPECT_NE(why.find("rollout rank"), std::string::npos) << why;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A layout the world cannot hold is refused on every rank, before anything runs.
TEST(RolloutRanksTest, ImpossibleLayoutIsRefused) {
  MpiCommunicator comm;
  SyncPpoOptions o = TinyRl(comm.world_size(), 1);  // no rank left to learn
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("rollout_ranks"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace engine::rl
