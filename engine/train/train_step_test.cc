#include "engine/train/train_step.h"

#include <cmath>
#include <limits>
#include <memory>

#include <gtest/gtest.h>

#include "api/dataset_ref.h"
#include "engine/model/policy_options.h"
#include "engine/testing/small_run.h"
#include "engine/train/train_data.h"

namespace engine {
namespace {

// The small run's model, optimizer and data for `steps` steps, on one process.
struct SmallStep {
  explicit SmallStep(int steps) : options(testing::SmallRun(steps)) {
    const api::EngineOptions& e = options.engine;
    config = PolicyConfigFromOptions(e).value();
    model = PolicyTransformer::Create(config).value();
    model->Init(e.seed);
    adam = std::make_unique<AdamW>(model->num_params(), AdamWConfig{});
    data = TrainData::Open(e, api::ParseDatasetRef(e.data.dataset).value(), config, comm).value();
    plan = data->PlanFor(0, 1);
    TrainStepOptions so;
    so.optim = e.optim;
    so.samples_per_step = plan.samples_per_step;
    step = std::make_unique<TrainStep>(*model, *adam, comm, so);
  }
  data::Loader<TrainBatch>& Loader(int steps) { return data->StartLoader(plan, 0, steps, 0, 2, 1); }

  TrainerOptions options;
  LocalCommunicator comm;
  PolicyConfig config;
  std::unique_ptr<PolicyTransformer> model;
  std::unique_ptr<AdamW> adam;
  std::unique_ptr<TrainData> data;
  data::PlanConfig plan;
  std::unique_ptr<TrainStep> step;
};

TEST(TrainStepTest, StatsAddUpAndTheDataMovesOn) {
  SmallStep s(2);
  auto& loader = s.Loader(2);
  bool every_rank = false;
  for (int i = 0; i < 2; ++i) {
    auto out = s.step->Run(i, 2, loader, &every_rank);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const StepStats& st = out->stats;
    EXPECT_EQ(st.step, i + 1);
    EXPECT_EQ(st.steps, 2);
    EXPECT_TRUE(std::isfinite(st.loss) && st.loss > 0.0);
    EXPECT_GT(st.grad_norm, 0.0);
    EXPECT_DOUBLE_EQ(
        st.lr, LearningRate(i, s.options.engine.optim.lr, s.options.engine.optim.warmup_steps, 2));
    EXPECT_EQ(out->next_sample, static_cast<uint64_t>((i + 1) * s.plan.samples_per_step));
    EXPECT_NEAR(st.tokens_per_s * st.step_seconds, out->real_tokens, 1e-6 * out->real_tokens);
    EXPECT_NEAR(st.padding_ratio, 1.0 - out->real_tokens / out->slots, 1e-12);
    const double phases = st.data_wait_seconds + st.forward_seconds + st.backward_seconds +
                          st.allreduce_seconds + st.optimizer_seconds;
    EXPECT_NEAR(phases, st.step_seconds, 1e-9);
    EXPECT_FALSE(st.mfu.has_value());              // no GEMM rate given
    EXPECT_FALSE(st.grad_wire_bytes.has_value());  // one rank sends nothing
    EXPECT_FALSE(out->stop_requested);
  }
  EXPECT_EQ(s.adam->t(), 2);
}

TEST(TrainStepTest, NonFiniteLossFailsOnEveryRankWithoutAnUpdate) {
  SmallStep s(1);
  auto& loader = s.Loader(1);
  float* p = s.model->params();
  for (size_t i = 0; i < s.model->num_params(); ++i) {
    p[i] = std::numeric_limits<float>::quiet_NaN();
  }
  bool every_rank = false;
  auto out = s.step->Run(0, 1, loader, &every_rank);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), common::Code::kInternal);
  EXPECT_NE(out.status().message().find("not finite at step 1"), std::string::npos);
  EXPECT_TRUE(every_rank);
  EXPECT_EQ(s.adam->t(), 0);
}

TEST(TrainStepTest, AStopRequestIsReportedInTheStep) {
  SmallStep s(1);
  std::atomic<bool> stop{true};
  TrainStepOptions so;
  so.optim = s.options.engine.optim;
  so.samples_per_step = s.plan.samples_per_step;
  so.stop_requested = &stop;
  TrainStep stopping(*s.model, *s.adam, s.comm, so);
  bool every_rank = false;
  auto out = stopping.Run(0, 1, s.Loader(1), &every_rank);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->stop_requested);
}

}  // namespace
}  // namespace engine
