#include "engine/testing/small_run.h"
#include "engine/train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <numeric>

#include <gtest/gtest.h>

#include "engine/format/checkpoint.h"
#include "engine/model/policy_options.h"
#include "engine/policy/held_out_eval.h"
#include "engine/report/recording_sink.h"
#include "engine/batches/train_batches.h"

namespace engine {
namespace {

using testing::SmallRun;  // two packed rows of 512 tokens per step: 13 samples
constexpr uint64_t kSmallSamples = 13;  // floor(2 · 512 / (72 + 4))

using testing::Mean;

TEST(TrainerTest, LossFallsSingleProcess) {
  LocalCommunicator comm;
  RecordingSink sink;
  TrainerOptions o = SmallRun(150);
  o.measure_gemm_ceiling = true;
  auto r = Train(o, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->losses.size(), 150u);
  const double first = Mean(r->losses, 0, 10), last = Mean(r->losses, 140, 150);
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
  EXPECT_GT(r->tokens_per_s, 0.0);
  EXPECT_GT(r->gemm_gflops, 0.0);

  auto events = sink.events();
  ASSERT_EQ(events.size(), 150u);  // one step event per step, no checkpoint dir, no eval
  const auto& e = events.back();
  EXPECT_EQ(e["type"], "step");
  EXPECT_EQ(e["step"], 150);
  EXPECT_EQ(e["steps"], 150);
  for (const char* k :
       {"loss", "lr", "grad_norm", "tokens_per_s", "samples_per_s", "step_seconds",
        "data_wait_seconds", "forward_seconds", "backward_seconds", "allreduce_seconds",
        "optimizer_seconds", "padding_ratio", "packing_efficiency", "mfu", "world_size"}) {
    EXPECT_TRUE(e.contains(k) && e[k].is_number()) << k;
  }
  // Real tokens: the step's samples' tokens, not slots.
  const double real = static_cast<double>(r->real_tokens.back());
  EXPECT_NEAR(e["tokens_per_s"].get<double>() * e["step_seconds"].get<double>(), real, 1e-6 * real);
  EXPECT_NEAR(e["padding_ratio"].get<double>() + e["packing_efficiency"].get<double>(), 1.0, 1e-12);
  EXPECT_GT(e["packing_efficiency"].get<double>(), 0.5);
  EXPECT_GT(e["mfu"].get<double>(), 0.0);
  EXPECT_LT(e["mfu"].get<double>(), 1.0);
  const double phases = e["data_wait_seconds"].get<double>() + e["forward_seconds"].get<double>() +
                        e["backward_seconds"].get<double>() + e["allreduce_seconds"].get<double>() +
                        e["optimizer_seconds"].get<double>();
  EXPECT_NEAR(phases, e["step_seconds"].get<double>(), 1e-6);
}

// The closed loop: the sampler (4 Euler steps) on held-out samples gets closer to the expert
// after training than before it.
TEST(TrainerTest, TrainedModelSamplesCloserActionsThanUntrained) {
  LocalCommunicator comm;
  RecordingSink sink;
  TrainerOptions o = SmallRun(150);
  o.eval_samples = 32;
  auto r = Train(o, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->evaluated);
  EXPECT_EQ(r->eval.samples, 32);
  EXPECT_EQ(r->eval.euler_steps, 4);
  const auto events = sink.events();
  ASSERT_EQ(events.back()["type"], "eval");
  EXPECT_DOUBLE_EQ(events.back()["action_mse"].get<double>(), r->eval.action_mse);

  auto untrained = PolicyTransformer::Create(PolicyConfigFromOptions(o.engine).value()).value();
  untrained->Init(o.engine.seed);
  const ReachTask task(o.engine.model.action_dim, o.engine.model.action_horizon, o.engine.seed);
  auto before = EvaluateHeldOut(*untrained, task, o.engine, 32);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_DOUBLE_EQ(before->zero_action_mse, r->eval.zero_action_mse);  // same held-out samples
  EXPECT_LT(r->eval.action_mse, 0.7 * before->action_mse)
      << "trained " << r->eval.action_mse << " untrained " << before->action_mse;
}

// Packing changes the layout, not the function: the same samples, packed into rows (varlen
// attention) or one per padded row (padded attention), give the same losses and parameters up to
// float rounding.
TEST(TrainerTest, PackedAndPaddedTrainTheSameFunction) {
  LocalCommunicator comm;
  TrainerOptions packed = SmallRun(4);
  TrainerOptions padded = SmallRun(4);
  padded.engine.data.packing = false;
  padded.engine.attention = "padded";
  padded.engine.data.rows_per_step = static_cast<int>(kSmallSamples);
  ASSERT_EQ(SamplesPerRank(packed.engine), SamplesPerRank(padded.engine));
  auto a = Train(packed, comm, nullptr);
  auto b = Train(padded, comm, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(b->padding_ratio, 0.0);
  EXPECT_EQ(a->real_tokens, b->real_tokens);
  for (size_t i = 0; i < a->losses.size(); ++i) {
    EXPECT_NEAR(a->losses[i], b->losses[i], 1e-5 * a->losses[i]) << "step " << i;
  }
  double max_diff = 0.0;
  for (size_t i = 0; i < a->params.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a->params[i] - b->params[i])));
  }
  EXPECT_LT(max_diff, 1e-4);
}

TEST(TrainerTest, SameSeedGivesSameRun) {
  LocalCommunicator comm;
  auto a = Train(SmallRun(5), comm, nullptr);
  auto b = Train(SmallRun(5), comm, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->losses, b->losses);
  EXPECT_EQ(a->params, b->params);
}

TEST(TrainerTest, WritesCheckpointsKeepsNewestAndReports) {
  auto dir =
      std::filesystem::temp_directory_path() /
      ("embody-trainer-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TrainerOptions o = SmallRun(25);
  o.checkpoint_dir = dir.string();
  o.engine.checkpoint.every_steps = 10;
  o.engine.checkpoint.keep = 2;
  LocalCommunicator comm;
  RecordingSink sink;
  auto r = Train(o, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto steps = ListCheckpointSteps(dir.string());
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(*steps, (std::vector<int64_t>{20, 25}));  // 10 pruned, 25 is the final one

  std::vector<nlohmann::json> ckpt_events;
  for (const auto& e : sink.events()) {
    if (e["type"] == "checkpoint") ckpt_events.push_back(e);
  }
  ASSERT_EQ(ckpt_events.size(), 3u);  // 10, 20, 25
  const auto& last = ckpt_events.back();
  EXPECT_EQ(last["step"], 25);
  const std::string path = last["path"];
  EXPECT_TRUE(std::filesystem::path(path).is_absolute());
  EXPECT_EQ(path, r->last_checkpoint);
  EXPECT_EQ(last["bytes"].get<int64_t>(), static_cast<int64_t>(std::filesystem::file_size(path)));

  // The final checkpoint holds the final parameters and the run's config.
  auto ck = LoadCheckpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->step, 25);
  EXPECT_EQ(ck->adam_t, 25);
  EXPECT_EQ(ck->params, r->params);
  EXPECT_EQ(ck->config["engine"]["model"]["d_model"], 48);
  EXPECT_EQ(ck->config["model"]["kind"], "policy_transformer");
  EXPECT_EQ(ck->config["model"]["action_horizon"], 4);
  std::filesystem::remove_all(dir);
}

TEST(TrainerTest, CheckpointDirErrorIsReported) {
  TrainerOptions o = SmallRun(2);
  o.checkpoint_dir = "/proc/embody-cannot-create-this";
  LocalCommunicator comm;
  auto r = Train(o, comm, nullptr);
  EXPECT_FALSE(r.ok());
}

// A stored dataset's name is the server's to resolve; the engine never trains on something else
// in its place.
TEST(TrainerTest, RefusesAStoredDatasetNameItWasNotLaunchedWith) {
  TrainerOptions o = SmallRun(2);
  o.engine.data.dataset = "dataset:lift@2";
  LocalCommunicator comm;
  auto r = Train(o, comm, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(r.status().field(), "engine.data.dataset");
}

TEST(TrainerTest, ResumeFromHalfwayMatchesStraightRun) {
  auto dir = std::filesystem::temp_directory_path() /
             ("embody-trainer-resume-" +
              std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TrainerOptions o = SmallRun(20);
  o.checkpoint_dir = dir.string();
  o.engine.checkpoint.every_steps = 10;
  LocalCommunicator comm;
  auto full = Train(o, comm, nullptr);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->next_sample, 20u * kSmallSamples);

  auto ck = LoadCheckpoint(CheckpointPath(dir.string(), 10));
  ASSERT_TRUE(ck.ok());
  EXPECT_EQ(ck->data.next_sample, 10u * kSmallSamples);
  EXPECT_EQ(ck->data.seed, 1u);
  EXPECT_EQ(ck->config["world_size"], 1);

  TrainerOptions r = SmallRun(20);
  r.resume_from = CheckpointPath(dir.string(), 10);
  RecordingSink sink;
  auto resumed = Train(r, comm, &sink);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->first_step, 10);
  ASSERT_EQ(resumed->losses.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(resumed->losses[i], full->losses[10 + i], 1e-6);
  EXPECT_EQ(resumed->params, full->params);      // bitwise
  EXPECT_EQ(sink.events().front()["step"], 11);  // step numbers continue

  // A checkpoint already at the last step: nothing left to do, parameters as saved.
  r.resume_from = CheckpointPath(dir.string(), 20);
  auto done = Train(r, comm, nullptr);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(done->losses.empty());
  EXPECT_EQ(done->params, full->params);
  std::filesystem::remove_all(dir);
}

// Asks the run to stop once it has seen step `at` (as SIGTERM does in main.cc).
class StopAtStep final : public EventSink {
 public:
  StopAtStep(int at, std::atomic<bool>* flag) : at_(at), flag_(flag) {}
  void Post(nlohmann::json event) override {
    if (event["type"] == "step" && event["step"] == at_) flag_->store(true);
  }

 private:
  const int at_;
  std::atomic<bool>* flag_;
};

TEST(TrainerTest, StopRequestCheckpointsTheStepAndResumesToTheSameRun) {
  auto dir = std::filesystem::temp_directory_path() /
             ("embody-trainer-stop-" +
              std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  LocalCommunicator comm;
  TrainerOptions straight = SmallRun(20);
  auto full = Train(straight, comm, nullptr);
  ASSERT_TRUE(full.ok()) << full.status().ToString();

  std::atomic<bool> stop{false};
  TrainerOptions o = SmallRun(20);
  o.checkpoint_dir = dir.string();
  o.engine.checkpoint.every_steps = 100;  // no periodic checkpoint before the stop
  o.eval_samples = 8;
  o.stop_requested = &stop;
  StopAtStep sink(7, &stop);
  auto stopped = Train(o, comm, &sink);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  // Seen after step 7, agreed in step 8: that step finishes and is checkpointed; no evaluation.
  EXPECT_TRUE(stopped->stopped);
  EXPECT_EQ(stopped->losses.size(), 8u);
  EXPECT_FALSE(stopped->evaluated);
  EXPECT_EQ(stopped->last_checkpoint, CheckpointPath(dir.string(), 8));
  EXPECT_EQ(*ListCheckpointSteps(dir.string()), (std::vector<int64_t>{8}));

  TrainerOptions r = SmallRun(20);
  r.checkpoint_dir = dir.string();
  r.resume_from = stopped->last_checkpoint;
  auto resumed = Train(r, comm, nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_FALSE(resumed->stopped);
  EXPECT_EQ(resumed->first_step, 8);
  EXPECT_EQ(resumed->params, full->params);  // bitwise: the stop lost nothing
  std::filesystem::remove_all(dir);
}

TEST(TrainerTest, ResumeRejectsMissingOrMismatchedCheckpoints) {
  auto dir = std::filesystem::temp_directory_path() /
             ("embody-trainer-resume-bad-" +
              std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  LocalCommunicator comm;
  TrainerOptions o = SmallRun(4);
  o.resume_from = (dir / "missing.ckpt").string();
  auto missing = Train(o, comm, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), common::Code::kNotFound);

  o = SmallRun(4);
  o.checkpoint_dir = dir.string();
  ASSERT_TRUE(Train(o, comm, nullptr).ok());
  const std::string path = CheckpointPath(dir.string(), 4);
  TrainerOptions wider = SmallRun(8);
  wider.engine.model.d_model = 32;
  wider.resume_from = path;
  auto r = Train(wider, comm, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), common::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("different model"), std::string::npos);

  TrainerOptions other_seed = SmallRun(8);
  other_seed.engine.seed = 2;
  other_seed.resume_from = path;
  EXPECT_FALSE(Train(other_seed, comm, nullptr).ok());

  TrainerOptions fewer = SmallRun(2);  // checkpoint at step 4 of a 2-step job
  fewer.resume_from = path;
  EXPECT_FALSE(Train(fewer, comm, nullptr).ok());
  std::filesystem::remove_all(dir);
}

TEST(TrainerTest, ReportsDataWait) {
  LocalCommunicator comm;
  auto r = Train(SmallRun(5), comm, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->data_wait_seconds, 0.0);
  EXPECT_EQ(r->next_sample, 5u * kSmallSamples);
}

}  // namespace
}  // namespace engine
