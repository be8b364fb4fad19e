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

#include "engine/data/loader.h"
#include "engine/dist/grad_buckets.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/model/mlp_policy.h"
#include "engine/sim/reach_task.h"
#include "engine/sim/rng.h"

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
  Rng rng = Rng::ForKey(5, comm.rank());
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
  // 13 samples per step split 6 / 7: the ranks hold different numbers of real tokens.
  const ReachTask task(/*action_dim=*/7, /*horizon=*/4, /*seed=*/9);
  const MlpConfig mc{task.obs_dim(), 32, 2, task.chunk_dim()};
  const int64_t global = 13;
  auto sample = [&](uint64_t first, uint64_t end, std::vector<float>* obs,
                    std::vector<float>* chunks) {
    const int b = static_cast<int>(end - first);
    obs->resize(static_cast<size_t>(b) * mc.obs_dim);
    chunks->resize(static_cast<size_t>(b) * mc.out_dim);
    for (int i = 0; i < b; ++i) {
      task.SampleAt(first + i, obs->data() + static_cast<size_t>(i) * mc.obs_dim,
                    chunks->data() + static_cast<size_t>(i) * mc.out_dim);
    }
    return b;
  };

  // This rank's share, all-reduced with weights = local samples × tokens per sample.
  uint64_t begin = 0, end = 0;
  data::RankSlice(0, global, comm.rank(), comm.world_size(), &begin, &end);
  EXPECT_EQ(end - begin, comm.rank() == 0 ? 6u : 7u);
  std::vector<float> obs, chunks;
  const int b = sample(begin, end, &obs, &chunks);
  MlpPolicy model(mc);
  model.Init(3);
  GradBuckets buckets(comm, model.grads(), model.num_params(), GradBucketOptions{4096});
  model.ZeroGrad();
  const float local_loss = model.Forward(obs.data(), chunks.data(), b);
  const double tokens_per_sample = 1 + task.horizon();
  buckets.Begin(b * tokens_per_sample, local_loss);
  model.Backward();
  buckets.MarkReady(0, model.num_params());
  const GlobalStepTotals t = buckets.Finish();

  // One rank, all 13 samples: the gradient of the global mean directly.
  MlpPolicy whole(mc);
  whole.Init(3);
  const int all = sample(0, global, &obs, &chunks);
  whole.ZeroGrad();
  const float whole_loss = whole.Forward(obs.data(), chunks.data(), all);
  whole.Backward();

  EXPECT_EQ(t.weight, global * tokens_per_sample);
  EXPECT_NEAR(t.loss, whole_loss, 1e-6 * std::fabs(whole_loss));
  double max_abs = 0.0, max_err = 0.0;
  for (size_t i = 0; i < model.num_params(); ++i) {
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(whole.grads()[i])));
    max_err =
        std::max(max_err, static_cast<double>(std::fabs(whole.grads()[i] - model.grads()[i])));
  }
  EXPECT_GT(max_abs, 1e-3);
  EXPECT_LT(max_err, 1e-5 * max_abs) << "max |g| " << max_abs;

  // Without token weighting (plain mean of rank means) the result is measurably different:
  // the test can tell the two apart.
  std::vector<float> unweighted(model.num_params());
  MlpPolicy again(mc);
  again.Init(3);
  const int b2 = sample(begin, end, &obs, &chunks);
  again.ZeroGrad();
  again.Forward(obs.data(), chunks.data(), b2);
  again.Backward();
  std::copy(again.grads(), again.grads() + again.num_params(), unweighted.begin());
  comm.AllreduceMean(unweighted.data(), unweighted.size());
  double unweighted_err = 0.0;
  for (size_t i = 0; i < model.num_params(); ++i) {
    unweighted_err =
        std::max(unweighted_err, static_cast<double>(std::fabs(whole.grads()[i] - unweighted[i])));
  }
  EXPECT_GT(unweighted_err, 100 * max_err);
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
