// The step model: parameter and FLOP counts against the engine, overlap bounds, monotonic
// behaviour, bottlenecks, memory, validation.
#include "planner/step_model.h"

#include <gtest/gtest.h>

#include "engine/data/embodied_lengths.h"
#include "engine/model/policy_transformer.h"
#include "planner/plan_request.h"

namespace planner {
namespace {

Cluster GpuCluster() {
  Cluster c;
  c.name = "test";
  c.ranks_per_node = 8;
  c.compute.flops_per_s = 200e12;
  c.compute.bf16_speedup = 2.0;
  c.compute.fp8_speedup = 3.0;
  c.compute.memory_bytes_per_s = 2e12;
  c.intra = {2e-6, 150e9};
  c.inter = {8e-6, 25e9};
  c.algorithm = AllreduceAlgorithm::kHierarchical;
  return c;
}

Workload BigWorkload() {
  Workload w;
  w.model = {.d_model = 2048, .layers = 24, .heads = 16, .mlp = 8192};
  w.tokens_per_sample = 300;
  w.segment_tokens = 300;
  w.samples_per_rank = 32;
  return w;
}

TEST(StepModel, ParamCountMatchesEngine) {
  for (auto shape : {ModelShape{}, ModelShape{.d_model = 128, .layers = 2, .heads = 4, .mlp = 512},
                     ModelShape{.d_model = 96, .layers = 3, .heads = 3, .mlp = 200,
                                .action_dim = 5, .action_horizon = 8}}) {
    engine::PolicyConfig config;
    config.d_model = shape.d_model;
    config.layers = shape.layers;
    config.heads = shape.heads;
    config.mlp = shape.mlp;
    config.action_dim = shape.action_dim;
    config.action_horizon = shape.action_horizon;
    auto model = engine::PolicyTransformer::Create(config);
    ASSERT_TRUE(model.ok());
    // The engine's buffer adds alignment padding between tensors (under 1% here).
    const double engine_params = static_cast<double>((*model)->num_params());
    EXPECT_LE(ParamCount(shape), engine_params);
    EXPECT_GT(ParamCount(shape), 0.99 * engine_params);
  }
}

TEST(StepModel, NarrowModelsRunBelowTheRate) {
  ComputeModel c;
  c.flops_per_s = 80e9;
  EXPECT_DOUBLE_EQ(RateAtWidth(c, 96), 80e9);  // no width law: every width alike
  c.half_rate_width = 64;
  EXPECT_DOUBLE_EQ(RateAtWidth(c, 64), 40e9);
  EXPECT_DOUBLE_EQ(RateAtWidth(c, 192), 60e9);
  EXPECT_LT(RateAtWidth(c, 96), RateAtWidth(c, 256));

  // The step's forward and backward are the FLOPs at that rate: with the law on, a model of
  // width 192 takes (192 + 64) / 192 of the time it takes without.
  Cluster cluster = GpuCluster();
  cluster.compute.flops_per_s = 80e9;
  Workload w;
  w.model = {.d_model = 192, .layers = 2, .heads = 4, .mlp = 768};
  const StepPrediction flat = PredictStep(w, cluster, {}, 1);
  cluster.compute.half_rate_width = 64;
  const StepPrediction narrow = PredictStep(w, cluster, {}, 1);
  EXPECT_NEAR(narrow.forward_s / flat.forward_s, 256.0 / 192.0, 1e-12);
  EXPECT_NEAR(narrow.backward_s / flat.backward_s, 256.0 / 192.0, 1e-12);
  EXPECT_DOUBLE_EQ(narrow.optimizer_s, flat.optimizer_s);

  cluster.compute.half_rate_width = -1;
  EXPECT_EQ(ValidateCluster(cluster).field(), "cluster.compute.half_rate_width");
}

TEST(StepModel, SimReachMeanMatchesEngine) {
  EXPECT_NEAR(kSimReachMeanContextTokens, engine::data::EmbodiedLengthConfig{}.MeanTokens(), 0.5);
}

TEST(StepModel, FlopsPerTokenClosedForm) {
  ModelShape m{.d_model = 256, .layers = 4, .heads = 8, .mlp = 1024};
  const double C = 256, M = 1024;
  EXPECT_DOUBLE_EQ(FlopsPerToken(m, 100), 3.0 * 4 * (2 * (4 * C * C + 2 * C * M) + 4 * 100 * C));
}

TEST(StepModel, OneRankIsComputeOnly) {
  Cluster c = GpuCluster();
  Workload w = BigWorkload();
  StepPrediction p = PredictStep(w, c, {}, 1);
  EXPECT_EQ(p.comm_s, 0.0);
  EXPECT_EQ(p.exposed_comm_s, 0.0);
  EXPECT_DOUBLE_EQ(p.backward_s, 2.0 * p.forward_s);
  const double flops = 32 * 300 * FlopsPerToken(w.model, 300);
  EXPECT_NEAR(p.forward_s + p.backward_s, flops / 200e12, 1e-12);
  EXPECT_DOUBLE_EQ(p.step_s, p.compute_s);
  EXPECT_EQ(p.bottleneck, Bottleneck::kCompute);
}

TEST(StepModel, OverlapNeverBelowMaxOfComputeAndComm) {
  Cluster c = GpuCluster();
  Workload w = BigWorkload();
  for (double samples : {1.0, 4.0, 32.0, 256.0}) {
    for (int ranks : {2, 8, 16, 256, 4096}) {
      for (double bucket : {65536.0, 2e6, 25e6, 1e9}) {
        w.samples_per_rank = samples;
        StepOptions o;
        o.bucket_bytes = bucket;
        StepPrediction p = PredictStep(w, c, o, ranks);
        EXPECT_GE(p.step_s + 1e-12, std::max(p.compute_s, p.comm_s));
        // ... and never above doing them one after the other.
        StepOptions serial = o;
        serial.overlap = false;
        StepPrediction s = PredictStep(w, c, serial, ranks);
        EXPECT_LE(p.step_s, s.step_s + 1e-12);
        EXPECT_NEAR(s.step_s, s.compute_s + s.comm_s, 1e-12);
      }
    }
  }
}

TEST(StepModel, BucketTimelineByHand) {
  // Two full buckets of 40% of the gradient and a 20% tail over 2 s of backward: ready at
  // 0.8 s, 1.6 s and 2 s; the link takes 1 s per full bucket, so they queue.
  Cluster c = GpuCluster();
  c.ranks_per_node = 2;
  Workload w;
  w.model = {.d_model = 8, .layers = 1, .heads = 1, .mlp = 8};
  w.samples_per_rank = 1;
  StepOptions o;
  o.bucket_bytes = 2e6;
  StepPrediction p0 = PredictStep(w, c, o, 2);
  const double n = p0.allreduce_bytes;
  // Scale the compute so backward takes exactly 2 s, whatever the tiny model's FLOPs.
  c.compute.flops_per_s *= p0.backward_s / 2.0;
  o.bucket_bytes = n * 0.4;
  c.intra = {0.0, 0.4 * n};  // 2 ranks: t = n·β, 1 s per full bucket
  StepPrediction p = PredictStep(w, c, o, 2);
  ASSERT_NEAR(p.backward_s, 2.0, 1e-9);
  ASSERT_EQ(p.buckets, 3);
  const double t_full = 1.0, t_tail = 0.5;
  // Bucket 0: 0.8 → 0.8 + t_full; bucket 1: max(that, 1.6) + t_full; tail: max(that, 2) + t_tail.
  double end = 0.8 + t_full;
  end = std::max(end, 1.6) + t_full;
  end = std::max(end, 2.0) + t_tail;
  EXPECT_NEAR(end, 3.3, 1e-9);
  EXPECT_NEAR(p.exposed_comm_s, end - 2.0, 1e-9);
  EXPECT_NEAR(p.comm_s, 2 * t_full + t_tail, 1e-12);
}

TEST(StepModel, SmallBucketsHideMoreUntilLatencyDominates) {
  Cluster c = GpuCluster();
  Workload w = BigWorkload();
  StepOptions one;
  one.bucket_bytes = 1e12;  // a single bucket: starts when backward ends
  StepOptions many;
  many.bucket_bytes = 25e6;
  StepPrediction p1 = PredictStep(w, c, one, 256), pm = PredictStep(w, c, many, 256);
  EXPECT_EQ(p1.buckets, 1);
  EXPECT_NEAR(p1.exposed_comm_s, p1.comm_s, 1e-12);
  EXPECT_LT(pm.exposed_comm_s, p1.exposed_comm_s);
  // More buckets pay more latency in total.
  EXPECT_GT(pm.comm_s, p1.comm_s);
}

TEST(StepModel, WeakScalingStepTimeGrowsWithRanks) {
  Cluster c = GpuCluster();
  c.algorithm = AllreduceAlgorithm::kRing;
  Workload w = BigWorkload();
  double prev = 0.0;
  for (int ranks = 1; ranks <= 8192; ranks *= 2) {
    StepPrediction p = PredictStep(w, c, {}, ranks);
    EXPECT_GE(p.step_s, prev) << ranks;
    prev = p.step_s;
  }
}

TEST(StepModel, StrongScalingEpochShrinksButEfficiencyFalls) {
  Cluster c = GpuCluster();
  Workload w = BigWorkload();
  w.global_samples = 8192;
  w.epoch_samples = 1e7;
  auto plan = MakePlan(w, c, {}, {8, 16, 32, 64, 512, 4096});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (size_t i = 1; i < plan->sizes.size(); ++i) {
    // While compute dominates, more ranks finish the epoch sooner; past that the all-reduce's
    // latency terms, which grow with the ranks, can make it slower.
    if (i < 4) {
      EXPECT_LT(plan->sizes[i].epoch_s, plan->sizes[i - 1].epoch_s);
    }
    EXPECT_LE(plan->sizes[i].efficiency, plan->sizes[i - 1].efficiency + 1e-9);
  }
  EXPECT_GT(plan->sizes[5].epoch_s, plan->sizes[4].epoch_s);
  EXPECT_DOUBLE_EQ(plan->sizes[0].efficiency, 1.0);
  EXPECT_GT(plan->last_efficient_ranks, 8);
  EXPECT_GT(plan->first_inefficient_ranks, plan->last_efficient_ranks);
}

TEST(StepModel, SlowNetworkIsTheBottleneck) {
  Cluster c = GpuCluster();
  c.inter = {50e-6, 0.1e9};
  StepPrediction p = PredictStep(BigWorkload(), c, {}, 64);
  EXPECT_EQ(p.bottleneck, Bottleneck::kCommunication);
  EXPECT_GT(p.exposed_comm_s, 0.0);
}

TEST(StepModel, SlowReaderIsTheBottleneck) {
  Cluster c = GpuCluster();
  c.reader_samples_per_s = 1.0;
  StepPrediction p = PredictStep(BigWorkload(), c, {}, 64);
  EXPECT_EQ(p.bottleneck, Bottleneck::kData);
  EXPECT_DOUBLE_EQ(p.step_s, 32.0);
}

TEST(StepModel, Fp8AllreduceAndLowPrecisionCompute) {
  Cluster c = GpuCluster();
  Workload w = BigWorkload();
  StepOptions fp32, bf16, fp8ar;
  bf16.precision = Precision::kBf16;
  fp8ar.fp8_allreduce = true;
  const double params = static_cast<double>(ParamCount(w.model));
  StepPrediction a = PredictStep(w, c, fp32, 64), b = PredictStep(w, c, bf16, 64),
                 f = PredictStep(w, c, fp8ar, 64);
  EXPECT_DOUBLE_EQ(a.allreduce_bytes, 4 * params);
  EXPECT_DOUBLE_EQ(b.allreduce_bytes, 2 * params);
  EXPECT_DOUBLE_EQ(f.allreduce_bytes, params * (1 + 4.0 / 128));
  EXPECT_LT(f.comm_s, a.comm_s);
  EXPECT_NEAR(b.forward_s * 2.0, a.forward_s, 1e-12);
  EXPECT_LT(b.memory.activations, a.memory.activations);
  EXPECT_GT(f.memory.grads, a.memory.grads);  // error-feedback residual
}

TEST(StepModel, MemoryPerRank) {
  Cluster c = GpuCluster();
  c.memory_per_rank_bytes = 80.0 * (1ull << 30);
  Workload w = BigWorkload();
  StepPrediction p = PredictStep(w, c, {}, 8);
  const double params = static_cast<double>(ParamCount(w.model));
  EXPECT_DOUBLE_EQ(p.memory.params + p.memory.grads + p.memory.optimizer, 16 * params);
  EXPECT_DOUBLE_EQ(p.memory.activations,
                   32.0 * 300 * 24 * (8.0 * 2048 + 2.0 * 8192) * 4);
  EXPECT_TRUE(p.fits_memory);
  w.samples_per_rank = 4096;
  EXPECT_FALSE(PredictStep(w, c, {}, 8).fits_memory);
}

TEST(StepModel, ValidationNamesTheField) {
  Cluster c = GpuCluster();
  Workload w = BigWorkload();
  auto field = [](const common::Status& s) { return s.field(); };
  c.inter.bytes_per_s = 0;
  EXPECT_EQ(field(ValidateCluster(c)), "cluster.inter.bytes_per_s");
  c = GpuCluster();
  c.ranks_per_node = 0;
  EXPECT_EQ(field(ValidateCluster(c)), "cluster.ranks_per_node");
  w.slots_per_token = 0.5;
  EXPECT_EQ(field(ValidateWorkload(w)), "workload.slots_per_token");
  StepOptions o;
  o.bucket_bytes = 10;
  EXPECT_EQ(field(ValidateOptions(o)), "options.bucket_bytes");
  w = BigWorkload();
  EXPECT_EQ(MakePlan(w, GpuCluster(), {}, {}).status().field(), "gpus");
  EXPECT_EQ(MakePlan(w, GpuCluster(), {}, {8, 0}).status().field(), "gpus[1]");
  w.global_samples = 16;
  EXPECT_EQ(MakePlan(w, GpuCluster(), {}, {8, 32}).status().field(), "gpus[1]");
}

}  // namespace
}  // namespace planner
