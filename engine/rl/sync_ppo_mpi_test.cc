// The synchronous PPO loop data-parallel over MPI ranks (label mpi; main in
// engine/dist/mpi_train_test.cc): replicas stay bitwise equal, and the ranks' environments differ.
// The asynchronous pipeline (async_ppo.h) too: every rank acts on its own threads, only the
// learner thread talks to the other ranks.
#include <mpi.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "engine/dist/mpi_communicator.h"
#include "engine/rl/async_ppo.h"
#include "engine/rl/sync_ppo.h"
#include "engine/testing/small_reach.h"

namespace engine::rl {
namespace {

// The tests' tiny reach over 2 ranks.
SyncPpoOptions TinyRl(int updates) { return testing::TinyReach(2, updates, 3); }

TEST(MpiSyncPpoTest, ReplicasStayIdenticalAcrossRanks) {
  MpiCommunicator comm;
  ASSERT_EQ(comm.world_size(), 2);
  SyncPpoOptions o = TinyRl(3);
  auto r = RunSyncPpo(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->updates.size(), 3u);
  EXPECT_EQ(r->updates.back().env_steps, 4 * 8 * 2 * 3);
  // Rank 0's heads, broadcast, must equal every rank's bitwise.
  std::vector<float> heads = r->final_heads;
  MPI_Bcast(heads.data(), static_cast<int>(heads.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(heads.data(), r->final_heads.data(), heads.size() * sizeof(float)), 0);
  // The statistics are global: every rank reports the same numbers.
  double loss = r->updates.back().ppo.value_loss;
  double max_loss = comm.AllreduceMax(loss), min_loss = -comm.AllreduceMax(-loss);
  EXPECT_EQ(max_loss, min_loss);
}

TEST(MpiSyncPpoTest, AsynchronousLearnersStayIdenticalAcrossRanks) {
  MpiCommunicator comm;
  ASSERT_EQ(comm.world_size(), 2);
  SyncPpoOptions o = TinyRl(4);
  o.engine.rl.env_latency.mean_ms = 0.5;
  o.engine.rl.env_latency.tail_probability = 0.1;
  o.engine.rl.disaggregated = true;
  o.engine.rl.max_staleness = 1;
  o.engine.rl.env_async = true;
  o.engine.rl.streaming = true;
  o.engine.rl.micro_batches = 2;
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->updates.size(), 4u);
  for (const UpdateRecord& u : r->updates) EXPECT_LE(u.max_staleness, 1);
  std::vector<float> heads = r->final_heads;
  MPI_Bcast(heads.data(), static_cast<int>(heads.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(heads.data(), r->final_heads.data(), heads.size() * sizeof(float)), 0);
  const double steps = static_cast<double>(r->updates.back().env_steps);
  EXPECT_EQ(comm.AllreduceMax(steps), -comm.AllreduceMax(-steps));
}

}  // namespace
}  // namespace engine::rl
