// Stopping a multi-rank RL job (label mpi; run under mpirun with 2 and with 4 ranks, main in
// engine/testing/mpi_test_main.cc). SIGTERM reaches the ranks of a job at different moments, so
// here the stop flag is raised on ONE rank only, at a chosen update: every rank must return, with
// `stopped`, after the same number of updates, and rank 0 must save the policy as a single-rank
// stop does. A rank left waiting in a collective shows as the test's timeout.
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "engine/dist/mpi_communicator.h"
#include "engine/report/event_sink.h"
#include "engine/rl/async_ppo.h"
#include "engine/rl/sync_ppo.h"
#include "engine/testing/small_reach.h"
#include "engine/testing/stop_at_step.h"

namespace engine::rl {
namespace {

enum class Loop { kSync, kAsync };

// Runs `o` with the stop flag raised on `rank` only: before the run when `at_step` is 0, else
// (rank 0 only) once update `at_step`'s event is posted. Rank 0 saves into a fresh directory.
common::Result<SyncPpoResult> RunStoppedOn(SyncPpoOptions o, Loop loop, int rank, int64_t at_step,
                                           MpiCommunicator& comm) {
  std::atomic<bool> stop{comm.rank() == rank && at_step == 0};
  o.stop_requested = &stop;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("rl_stop_mpi_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  if (comm.rank() == 0) o.checkpoint_dir = dir.string();
  testing::StopAtStep sink(&stop, at_step);
  EventSink* events = comm.rank() == rank && at_step > 0 ? &sink : nullptr;
  auto r = loop == Loop::kSync ? RunSyncPpo(o, comm, events) : RunAsyncPpo(o, comm, events);
  std::filesystem::remove_all(dir);
  return r;
}

// Every learner stopped after `updates` updates, every rollout rank (rank ≥ learners) stopped
// having learned nothing, and rank 0 saved the policy of the last update it learned.
void ExpectAllStoppedAfter(const common::Result<SyncPpoResult>& r, int rank, int learners,
                           size_t updates) {
  ASSERT_TRUE(r.ok()) << "rank " << rank << ": " << r.status().ToString();
  EXPECT_TRUE(r->stopped) << "rank " << rank;
  EXPECT_EQ(r->updates.size(), rank < learners ? updates : 0u) << "rank " << rank;
  if (rank == 0) {
    EXPECT_NE(r->checkpoint.find("step-" + std::to_string(updates) + ".ckpt"), std::string::npos)
        << r->checkpoint;
  }
}

SyncPpoOptions Colocated(int updates) { return testing::TinyReach(2, updates, 3); }

SyncPpoOptions AsyncColocated(int updates) {
  SyncPpoOptions o = Colocated(updates);
  o.engine.rl.disaggregated = true;
  o.engine.rl.max_staleness = 1;
  o.engine.rl.streaming = true;  // Takes inside the update, between collectives
  o.engine.rl.micro_batches = 2;
  return o;
}

SyncPpoOptions WithRolloutRanks(int rollout_ranks, int updates) {
  SyncPpoOptions o = testing::TinyReach(rollout_ranks, updates, 5);
  o.engine.rl.disaggregated = true;
  o.engine.rl.rollout_ranks = rollout_ranks;
  o.engine.rl.max_staleness = 1;
  return o;
}

// Rank 0's flag goes up after update 2 of 6: the ranks agree on it in update 3 and all stop there.
TEST(RlStopTest, SyncRanksStopAfterTheSameUpdate) {
  MpiCommunicator comm;
  if (comm.world_size() != 2) GTEST_SKIP() << "a 2-rank case";
  auto r = RunStoppedOn(Colocated(6), Loop::kSync, 0, 2, comm);
  ExpectAllStoppedAfter(r, comm.rank(), 2, 3);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The last rank's flag is up before the run: no rank learns anything.
TEST(RlStopTest, SyncRanksStopBeforeTheFirstUpdate) {
  MpiCommunicator comm;
  if (comm.world_size() != 2) GTEST_SKIP() << "a 2-rank case";
  auto r = RunStoppedOn(Colocated(6), Loop::kSync, 1, 0, comm);
  ExpectAllStoppedAfter(r, comm.rank(), 2, 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(RlStopTest, AsyncRanksStopAfterTheSameUpdate) {
  MpiCommunicator comm;
  if (comm.world_size() != 2) GTEST_SKIP() << "a 2-rank case";
  auto r = RunStoppedOn(AsyncColocated(6), Loop::kAsync, 0, 2, comm);
  ExpectAllStoppedAfter(r, comm.rank(), 2, 3);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(RlStopTest, AsyncRanksStopBeforeTheFirstUpdate) {
  MpiCommunicator comm;
  if (comm.world_size() != 2) GTEST_SKIP() << "a 2-rank case";
  auto r = RunStoppedOn(AsyncColocated(6), Loop::kAsync, 1, 0, comm);
  ExpectAllStoppedAfter(r, comm.rank(), 2, 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

// One learner: its flag after update 2 ends its rollout ranks after update 3.
TEST(RlStopTest, OneLearnerStopsItsRolloutRanks) {
  MpiCommunicator comm;
  const int R = comm.world_size() - 1;
  auto r = RunStoppedOn(WithRolloutRanks(R, 6), Loop::kAsync, 0, 2, comm);
  ExpectAllStoppedAfter(r, comm.rank(), 1, 3);
  MPI_Barrier(MPI_COMM_WORLD);
}

// A rollout rank's flag (up before the run) reaches its learner ahead of its first segment: the
// learners stop after the first update.
TEST(RlStopTest, ARolloutRanksStopReachesTheLearners) {
  MpiCommunicator comm;
  const int W = comm.world_size(), R = W == 4 ? 2 : W - 1;
  auto r = RunStoppedOn(WithRolloutRanks(R, 6), Loop::kAsync, W - 1, 0, comm);
  ExpectAllStoppedAfter(r, comm.rank(), W - R, 1);
  MPI_Barrier(MPI_COMM_WORLD);
}

// Two learners with two rollout ranks: learner 0's flag after update 2 stops both after update 3.
TEST(RlStopTest, TwoLearnersStopAfterTheSameUpdate) {
  MpiCommunicator comm;
  if (comm.world_size() != 4) GTEST_SKIP() << "a 4-rank case";
  auto r = RunStoppedOn(WithRolloutRanks(2, 6), Loop::kAsync, 0, 2, comm);
  ExpectAllStoppedAfter(r, comm.rank(), 2, 3);
  MPI_Barrier(MPI_COMM_WORLD);
}

// Learner 1's flag up before the run: neither learner learns anything.
TEST(RlStopTest, TwoLearnersStopBeforeTheFirstUpdate) {
  MpiCommunicator comm;
  if (comm.world_size() != 4) GTEST_SKIP() << "a 4-rank case";
  auto r = RunStoppedOn(WithRolloutRanks(2, 6), Loop::kAsync, 1, 0, comm);
  ExpectAllStoppedAfter(r, comm.rank(), 2, 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace engine::rl
