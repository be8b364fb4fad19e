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

TEST(TrainerTest, ResumeFromHalfwayMatchesStraightRun) {
  auto dir = std::filesystem::temp_directory_path() /
             ("embody-trainer-resume-" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  TrainerOptions o = SmallRun(20);
  o.checkpoint_dir = dir.string();
  o.engine.checkpoint.every_steps = 10;
  LocalCommunicator comm;
  auto full = Train(o, comm, nullptr);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->next_sample, 20u * 32);

  auto ck = LoadCheckpoint(CheckpointPath(dir.string(), 10));
  ASSERT_TRUE(ck.ok());
  EXPECT_EQ(ck->data.next_sample, 10u * 32);
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

TEST(TrainerTest, ResumeRejectsMissingOrMismatchedCheckpoints) {
  auto dir = std::filesystem::temp_directory_path() /
             ("embody-trainer-resume-bad-" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
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
  EXPECT_EQ(r->next_sample, 5u * 32);
}

}  // namespace
}  // namespace engine
