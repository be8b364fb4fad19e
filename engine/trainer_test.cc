#include "engine/trainer.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "engine/checkpoint.h"
#include "engine/report/recording_sink.h"

namespace engine {
namespace {

TrainerOptions SmallRun(int steps) {
  TrainerOptions o;
  o.engine.model.d_model = 64;
  o.engine.model.layers = 2;
  o.engine.model.action_horizon = 8;
  o.engine.model.action_dim = 7;
  o.engine.data.rows_per_step = 32;
  o.engine.optim.lr = 2e-3;
  o.engine.optim.steps = steps;
  o.engine.optim.warmup_steps = 10;
  o.engine.seed = 1;
  o.print_progress = false;
  return o;
}

TEST(TrainerTest, LossFallsSingleProcess) {
  LocalCommunicator comm;
  RecordingSink sink;
  auto r = Train(SmallRun(100), comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->losses.size(), 100u);
  float first = r->losses.front(), last = r->losses.back();
  EXPECT_LT(last, 0.5f * first) << "first " << first << " last " << last;
  EXPECT_GT(r->tokens_per_s, 0.0);

  auto events = sink.events();
  ASSERT_EQ(events.size(), 100u);  // one step event per step, no checkpoint dir
  const auto& e = events.back();
  EXPECT_EQ(e["type"], "step");
  EXPECT_EQ(e["step"], 100);
  EXPECT_EQ(e["steps"], 100);
  for (const char* k :
       {"loss", "tokens_per_s", "samples_per_s", "step_seconds", "lr", "grad_norm"}) {
    EXPECT_TRUE(e.contains(k) && e[k].is_number()) << k;
  }
  // tokens = samples * (1 observation token + H action tokens)
  EXPECT_NEAR(e["tokens_per_s"].get<double>(), e["samples_per_s"].get<double>() * 9,
              1e-6 * e["tokens_per_s"].get<double>());
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
      ("embody-trainer-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
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
  EXPECT_EQ(ck->config["engine"]["model"]["d_model"], 64);
  EXPECT_EQ(ck->config["model"]["out_dim"], 8 * 7);
  std::filesystem::remove_all(dir);
}

TEST(TrainerTest, CheckpointDirErrorIsReported) {
  TrainerOptions o = SmallRun(2);
  o.checkpoint_dir = "/proc/embody-cannot-create-this";
  LocalCommunicator comm;
  auto r = Train(o, comm, nullptr);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace engine
