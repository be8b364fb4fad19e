// GradBuckets across ranks (part of engine_mpi_test, run under mpirun -np 2): the bucketed,
// token-weighted all-reduce equals a plain single-buffer all-reduce of the same weighted
// gradients, and equals the gradient of the global per-token mean loss computed on one rank over
// all the data, with ranks holding different numbers of tokens.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "engine/data/loader.h"
#include "engine/dist/grad_buckets.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/model/policy_options.h"
#include "engine/model/policy_transformer.h"
#include "engine/sim/reach_task.h"
#include "engine/batches/train_batches.h"

namespace engine {
namespace {

// A fake model's backward: "layers" of uneven sizes, finished last to first, each marked ready
// as soon as it is written, with MPI progress in between. Rank 1 marks the layers of each pair in
// swapped order, so the ranks mark ranges in different orders; buckets must still start in the
// same order everywhere.
void FakeBackward(const std::vector<float>& values, float* grads, GradBuckets* buckets, int rank) {
  std::vector<size_t> bounds = {0};
  for (size_t i = 0; bounds.back() < values.size(); ++i) {
    bounds.push_back(std::min(values.size(), bounds.back() + 1000 + 3779 * (i % 5)));
  }
  const size_t layers = bounds.size() - 1;
  std::vector<size_t> order;  // last layer first
  for (size_t l = layers; l-- > 0;) order.push_back(l);
  if (rank == 1) {
    for (size_t i = 0; i + 1 < order.size(); i += 2) std::swap(order[i], order[i + 1]);
  }
  for (size_t l : order) {
    std::copy(values.begin() + bounds[l], values.begin() + bounds[l + 1], grads + bounds[l]);
    buckets->MarkReady(bounds[l], bounds[l + 1]);
    buckets->Poll();
  }
}

TEST(GradBucketsMpiTest, EqualsPlainAllreduceOfWeightedGradientsBitwise) {
  MpiCommunicator comm;
  ASSERT_EQ(comm.world_size(), 2) << "run under mpirun -np 2";
  const size_t n = 100'003;
  common::Rng rng = common::Rng::ForKey(5, comm.rank());
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>(rng.Normal());
  // Uneven token counts: 1000 on rank 0, 1737 on rank 1.
  const double weight = 1000.0 + 737.0 * comm.rank();
  const double local_loss = 0.25 + comm.rank();

  std::vector<float> grads(n);
  GradBuckets buckets(comm, grads.data(), n, GradBucketOptions{16 * 1024});
  ASSERT_GT(buckets.num_buckets(), 20u);
  for (int step = 0; step < 3; ++step) {  // reused across steps
    buckets.Begin(weight, local_loss);
    FakeBackward(values, grads.data(), &buckets, comm.rank());
    const GlobalStepTotals t = buckets.Finish();

    // The reference: one blocking all-reduce of the whole weighted buffer.
    std::vector<float> ref = values;
    for (float& x : ref) x *= static_cast<float>(weight);
    MPI_Allreduce(MPI_IN_PLACE, ref.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    const double total = comm.AllreduceSum(weight);
    for (float& x : ref) x *= static_cast<float>(1.0 / total);

    EXPECT_EQ(t.weight, 2737.0);
    EXPECT_NEAR(t.loss, (1000.0 * 0.25 + 1737.0 * 1.25) / 2737.0, 1e-12);
    size_t mismatches = 0;
    for (size_t i = 0; i < n; ++i) mismatches += grads[i] != ref[i];
    EXPECT_EQ(mismatches, 0u) << "step " << step;
  }
}

TEST(GradBucketsMpiTest, EqualsGradientOfGlobalMeanOverAllData) {
  MpiCommunicator comm;
  ASSERT_EQ(comm.world_size(), 2);
  // The trainer's own data path and model, tiny: 13 samples per step split 6 / 7, so the ranks
  // hold different numbers of real tokens.
  api::EngineOptions e;
  e.model.d_model = 32;
  e.model.layers = 2;
  e.model.heads = 4;
  e.model.mlp = 64;
  e.model.action_horizon = 4;
  e.seed = 9;
  const PolicyConfig pc = PolicyConfigFromOptions(e).value();
  const ReachTask task(e.model.action_dim, e.model.action_horizon, e.seed);
  const int64_t global = 13;
  auto batch_of = [&](int rank, int world, TrainBatch* tb) {
    data::PlanConfig plan_config = PlanConfigFor(e, rank, world);
    plan_config.samples_per_step = global;
    auto plan = data::MakePlan(plan_config, 0, 0).value();
    ASSERT_TRUE(FillTrainBatch(task, pc, /*packing=*/true, plan, tb).ok());
  };

  // This rank's share, all-reduced with weights = its loss weight, overlapped with backward.
  TrainBatch mine;
  batch_of(comm.rank(), comm.world_size(), &mine);
  EXPECT_EQ(mine.batch.num_samples(), comm.rank() == 0 ? 6 : 7);
  auto model = PolicyTransformer::Create(pc).value();
  model->Init(3);
  GradBuckets buckets(comm, model->grads(), model->num_params(), GradBucketOptions{4096});
  model->ZeroGrad();
  const float local_loss = model->Forward(mine.batch).value();
  buckets.Begin(mine.batch.WeightTotal(), local_loss);
  BackwardHooks hooks;
  hooks.ready = buckets.ReadyCallback();
  hooks.poll = [&] { buckets.Poll(); };
  ASSERT_TRUE(model->Backward(&hooks).ok());
  const GlobalStepTotals t = buckets.Finish();

  // One rank, all 13 samples: the gradient of the global mean directly.
  TrainBatch all;
  batch_of(0, 1, &all);
  auto whole = PolicyTransformer::Create(pc).value();
  whole->Init(3);
  whole->ZeroGrad();
  const float whole_loss = whole->Forward(all.batch).value();
  ASSERT_TRUE(whole->Backward().ok());

  EXPECT_EQ(t.weight, all.batch.WeightTotal());
  EXPECT_NEAR(t.loss, whole_loss, 1e-5 * std::fabs(whole_loss));
  const size_t n = model->num_params();
  double max_abs = 0.0, max_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(whole->grads()[i])));
    max_err =
        std::max(max_err, static_cast<double>(std::fabs(whole->grads()[i] - model->grads()[i])));
  }
  EXPECT_GT(max_abs, 1e-3);
  EXPECT_LT(max_err, 1e-4 * max_abs) << "max |g| " << max_abs;

  // Without token weighting (plain mean of rank means) the result is measurably different:
  // the test can tell the two apart.
  auto again = PolicyTransformer::Create(pc).value();
  again->Init(3);
  again->ZeroGrad();
  ASSERT_TRUE(again->Forward(mine.batch).ok());
  ASSERT_TRUE(again->Backward().ok());
  std::vector<float> unweighted(again->grads(), again->grads() + n);
  comm.AllreduceMean(unweighted.data(), unweighted.size());
  double unweighted_err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    unweighted_err =
        std::max(unweighted_err, static_cast<double>(std::fabs(whole->grads()[i] - unweighted[i])));
  }
  EXPECT_GT(unweighted_err, 10 * max_err);
}

// Buckets really do go out during backward: with MPI progress driven between layers, the earlier
// buckets' all-reduces are complete before Finish is called.
TEST(GradBucketsMpiTest, BucketsCompleteWhileBackwardIsStillRunning) {
  MpiCommunicator comm;
  const size_t layer = 16 * 1024, layers = 16, n = layer * layers;  // 64 KiB per layer
  std::vector<float> g(n, 1.0f);
  GradBuckets buckets(comm, g.data(), n, GradBucketOptions{layer * sizeof(float)});
  ASSERT_EQ(buckets.num_buckets(), layers);
  buckets.Begin(1.0, 0.0);
  for (size_t l = layers; l-- > 0;) {
    buckets.MarkReady(l * layer, (l + 1) * layer);
    for (int i = 0; i < 50; ++i) {  // "the next layer's compute", with progress calls in it
      buckets.Poll();
      usleep(100);
    }
  }
  buckets.Finish();
  EXPECT_GE(buckets.completed_before_finish(), layers / 2);
  for (float x : g) ASSERT_EQ(x, 1.0f);  // (1·1 + 1·1) / 2
}

TEST(GradBucketsMpiTest, RankWithoutTokens) {
  MpiCommunicator comm;
  std::vector<float> g(5000, comm.rank() == 0 ? 2.0f : NAN);
  GradBuckets buckets(comm, g.data(), g.size(), GradBucketOptions{4096});
  buckets.Begin(comm.rank() == 0 ? 10.0 : 0.0, comm.rank() == 0 ? 1.5 : NAN);
  const GlobalStepTotals t = buckets.Finish();
  EXPECT_EQ(t.weight, 10.0);
  EXPECT_EQ(t.loss, 1.5);
  for (float x : g) ASSERT_EQ(x, 2.0f);
}

}  // namespace
}  // namespace engine
