// Data-parallel training under MPI: run with `mpirun -np 2 engine_mpi_test` (CTest label mpi).
// Every rank runs every test; a failure on any rank fails mpirun.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "common/hash.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/train/trainer.h"

namespace engine {
namespace {

uint64_t Fnv1a(const std::vector<float>& v) {
  return common::Fnv1a64Bytes(v.data(), v.size() * sizeof(float));
}

TEST(MpiCommunicatorTest, AllreduceMean) {
  MpiCommunicator comm;
  ASSERT_GE(comm.world_size(), 2) << "run under mpirun -np 2 (or more)";
  std::vector<float> v(1000, static_cast<float>(comm.rank() + 1));
  comm.AllreduceMean(v.data(), v.size());
  const float want = (comm.world_size() + 1) / 2.0f;  // mean of 1..world
  for (float x : v) ASSERT_FLOAT_EQ(x, want);
  EXPECT_DOUBLE_EQ(comm.AllreduceSum(1.0), comm.world_size());
  EXPECT_DOUBLE_EQ(comm.AllreduceMax(comm.rank()), comm.world_size() - 1);
}

// Rank 0 alone creates the checkpoint directory; when it cannot, every rank's run ends with an
// error at once instead of the other ranks waiting for rank 0 in the first step.
TEST(MpiTrainTest, CheckpointDirectoryRank0CannotCreateFailsEveryRank) {
  MpiCommunicator comm;
  TrainerOptions o;
  o.engine.model.d_model = 32;
  o.engine.model.layers = 1;
  o.engine.model.heads = 2;
  o.engine.model.mlp = 64;
  o.engine.model.action_horizon = 4;
  o.engine.data.rows_per_step = 1;
  o.engine.optim.steps = 4;
  o.checkpoint_dir = "/proc/embody-cannot-create-this/ckpt";
  o.print_progress = false;
  auto r = Train(o, comm, nullptr);
  ASSERT_FALSE(r.ok()) << "rank " << comm.rank() << " trained without its checkpoint directory";
  if (comm.rank() != 0) {
    EXPECT_NE(r.status().message().find("rank 0"), std::string::npos) << r.status().ToString();
  }
}

TEST(MpiTrainTest, ParametersIdenticalOnAllRanksAndLossFalls) {
  MpiCommunicator comm;
  TrainerOptions o;
  o.engine.model.d_model = 48;
  o.engine.model.layers = 2;
  o.engine.model.heads = 4;
  o.engine.model.mlp = 96;
  o.engine.model.action_horizon = 4;
  o.engine.data.rows_per_step = 2;  // 13 samples per rank
  o.engine.optim.lr = 4e-3;
  o.engine.optim.steps = 120;
  o.engine.optim.warmup_steps = 10;
  o.grad_bucket_bytes = 16 * 1024;  // several buckets, started from inside backward
  o.print_progress = false;
  auto r = Train(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  // Bitwise identical replicas: the max and min of the parameter hash over ranks agree.
  uint64_t h = Fnv1a(r->params), hmax = 0, hmin = 0;
  MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(hmax, hmin) << "parameters differ between ranks";
  // Same check in numbers, to say by how much if they do differ.
  double max_abs = 0.0;
  std::vector<float> rank0 = r->params;
  MPI_Bcast(rank0.data(), static_cast<int>(rank0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  for (size_t i = 0; i < rank0.size(); ++i) {
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(rank0[i] - r->params[i])));
  }
  EXPECT_EQ(max_abs, 0.0);

  const auto mean = [&](size_t b, size_t e) {
    double s = 0.0;
    for (size_t i = b; i < e; ++i) s += r->losses[i];
    return s / (e - b);
  };
  const size_t n = r->losses.size();
  EXPECT_LT(mean(n - 10, n), 0.7 * mean(0, 10))
      << "first " << mean(0, 10) << " last " << mean(n - 10, n);

  // The ranks trained on different data: a one-process run on rank 0's data alone ends elsewhere.
  LocalCommunicator local;
  auto alone = Train(o, local, nullptr);
  ASSERT_TRUE(alone.ok());
  EXPECT_NE(Fnv1a(alone->params), h);
}

}  // namespace
}  // namespace engine
