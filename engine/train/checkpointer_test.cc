#include "engine/train/checkpointer.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/report/recording_sink.h"

namespace engine {
namespace {

constexpr size_t kCheckpointerParams = 5;

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("embody-checkpointer-test-" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    // A few updates so the moments are not zeros.
    std::vector<float> grads = {0.5f, -0.25f, 1.0f, 0.0f, -2.0f};
    for (int i = 0; i < 3; ++i) adam_.Step(params_.data(), grads.data(), 0.01f);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  api::CheckpointOptions Every(int every_steps, int keep) {
    api::CheckpointOptions o;
    o.every_steps = every_steps;
    o.keep = keep;
    return o;
  }
  TrainState State() { return TrainState{params_.data(), kCheckpointerParams, &adam_, nullptr}; }

  std::filesystem::path dir_;
  std::vector<float> params_ = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  AdamW adam_{kCheckpointerParams, AdamWConfig{}};
  LocalCommunicator comm_;
  const nlohmann::json config_ = {{"model", {{"d_model", 8}}}, {"world_size", 1}};
};

TEST_F(CheckpointerTest, DueEveryNStepsAtTheLastAndWhenStopping) {
  auto c = Checkpointer::Create(dir_.string(), Every(3, 2), config_, comm_, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<int> due;
  for (int done = 1; done <= 8; ++done) {
    if (c->Due(done, 8, false)) due.push_back(done);
  }
  EXPECT_EQ(due, (std::vector<int>{3, 6, 8}));
  EXPECT_TRUE(c->Due(4, 8, true));

  auto only_last = Checkpointer::Create(dir_.string(), Every(0, 2), config_, comm_, nullptr);
  ASSERT_TRUE(only_last.ok());
  EXPECT_FALSE(only_last->Due(3, 8, false));
  EXPECT_TRUE(only_last->Due(8, 8, false));

  auto none = Checkpointer::Create("", Every(1, 2), config_, comm_, nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->Due(8, 8, true));
}

TEST_F(CheckpointerTest, KeepsTheNewestAndReportsEachWrite) {
  RecordingSink sink;
  auto c = Checkpointer::Create(dir_.string(), Every(1, 2), config_, comm_, &sink);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(std::filesystem::path(c->dir()).is_absolute());
  for (int done = 1; done <= 4; ++done) {
    ASSERT_TRUE(c->Save(done, State(), DataPosition{9, 13u * done}).ok());
  }
  EXPECT_EQ(*ListCheckpointSteps(dir_.string()), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(c->last_path(), CheckpointPath(c->dir(), 4));

  const auto events = sink.events();
  ASSERT_EQ(events.size(), 4u);
  const auto& last = events.back();
  EXPECT_EQ(last["type"], "checkpoint");
  EXPECT_EQ(last["step"], 4);
  EXPECT_EQ(last["path"], c->last_path());
  EXPECT_EQ(last["bytes"].get<int64_t>(),
            static_cast<int64_t>(std::filesystem::file_size(c->last_path())));

  // The file holds the state as it was, ready to resume.
  auto ck = LoadCheckpoint(c->last_path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->step, 4);
  EXPECT_EQ(ck->params, params_);
  EXPECT_EQ(ck->adam_t, 3);
  EXPECT_EQ(ck->adam_m, adam_.m());
  EXPECT_EQ(ck->adam_v, adam_.v());
  EXPECT_EQ(ck->data.seed, 9u);
  EXPECT_EQ(ck->data.next_sample, 52u);
  EXPECT_EQ(ck->config, config_);
  EXPECT_EQ(ck->grad_residual_ranks, 0u);
}

TEST_F(CheckpointerTest, WriteErrorsAreReturnedAndNothingIsReported) {
  auto cannot =
      Checkpointer::Create("/proc/embody-cannot-create-this", Every(1, 2), config_, comm_, nullptr);
  EXPECT_FALSE(cannot.ok());

  RecordingSink sink;
  auto c = Checkpointer::Create(dir_.string(), Every(1, 2), config_, comm_, &sink);
  ASSERT_TRUE(c.ok());
  std::filesystem::remove_all(dir_);  // gone under the run's feet
  EXPECT_FALSE(c->Save(1, State(), DataPosition{9, 13}).ok());
  EXPECT_TRUE(c->last_path().empty());
  EXPECT_TRUE(sink.events().empty());
}

}  // namespace
}  // namespace engine
