#include "engine/train/resume.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/file_util.h"

namespace engine {
namespace {

constexpr size_t kResumeParams = 6;

ResumeExpectation Job() {
  ResumeExpectation want;
  want.model = {{"kind", "policy_transformer"}, {"d_model", 48}, {"params", kResumeParams}};
  want.params = kResumeParams;
  want.seed = 9;
  want.steps = 20;
  return want;
}

// A checkpoint of the job above at step 10.
CheckpointData Fitting() {
  CheckpointData ck;
  ck.step = 10;
  ck.adam_t = 10;
  ck.config = {{"model", Job().model}, {"world_size", 2}};
  ck.params = {0.5f, -1.0f, 2.0f, 0.25f, -0.125f, 3.0f};
  ck.adam_m.assign(kResumeParams, 0.01f);
  ck.adam_v.assign(kResumeParams, 0.02f);
  ck.data.seed = 9;
  ck.data.next_sample = 130;
  return ck;
}

void ExpectRefused(const CheckpointData& ck, const ResumeExpectation& want, const char* says) {
  const common::Status s = CheckResumable(ck, want, "/ck/step-10.ckpt");
  ASSERT_FALSE(s.ok()) << says;
  EXPECT_EQ(s.code(), common::Code::kInvalidArgument);
  EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/ck/step-10.ckpt"), std::string::npos) << s.message();
}

TEST(ResumeTest, AcceptsOnlyACheckpointOfTheSameJob) {
  EXPECT_TRUE(CheckResumable(Fitting(), Job(), "p").ok());
  CheckpointData at_end = Fitting();
  at_end.step = 20;  // nothing left to run, but nothing wrong either
  EXPECT_TRUE(CheckResumable(at_end, Job(), "p").ok());

  CheckpointData v1 = Fitting();
  v1.has_data_position = false;
  ExpectRefused(v1, Job(), "version 1");

  ResumeExpectation wider = Job();
  wider.model["d_model"] = 64;
  ExpectRefused(Fitting(), wider, "different model");

  CheckpointData fewer = Fitting();
  fewer.params.pop_back();
  ExpectRefused(fewer, Job(), "different model");

  CheckpointData other_seed = Fitting();
  other_seed.data.seed = 10;
  ExpectRefused(other_seed, Job(), "seed is 9");

  ResumeExpectation on_dataset = Job();
  on_dataset.dataset_samples = 500;
  on_dataset.dataset_fingerprint = 77;
  ExpectRefused(Fitting(), on_dataset, "continues the built-in stream");
  CheckpointData other_dataset = Fitting();
  other_dataset.data.dataset_samples = 500;
  other_dataset.data.dataset_fingerprint = 78;
  ExpectRefused(other_dataset, on_dataset, "fingerprint 78");
  other_dataset.data.dataset_fingerprint = 77;
  EXPECT_TRUE(CheckResumable(other_dataset, on_dataset, "p").ok());

  CheckpointData past = Fitting();
  past.step = 21;
  ExpectRefused(past, Job(), "past the job's 20 steps");
}

class ResumeFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("embody-resume-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ResumeFileTest, RestoresParametersOptimizerAndDataPosition) {
  const std::string path = CheckpointPath(dir_.string(), 10);
  ASSERT_TRUE(SaveCheckpoint(path, Fitting()).ok());
  std::vector<float> params(kResumeParams, 0.0f);
  AdamW adam(kResumeParams, AdamWConfig{});
  TrainState state{params.data(), kResumeParams, &adam, nullptr};
  LocalCommunicator comm;
  auto at = Resume(path, false, Job(), comm, &state);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(at->step, 10);
  EXPECT_EQ(at->next_sample, 130u);
  EXPECT_EQ(params, Fitting().params);
  EXPECT_EQ(adam.t(), 10);
  EXPECT_EQ(adam.m(), Fitting().adam_m);
  EXPECT_EQ(adam.v(), Fitting().adam_v);
}

TEST_F(ResumeFileTest, RefusedOrUnreadableCheckpointLeavesTheStateAlone) {
  const std::string path = CheckpointPath(dir_.string(), 10);
  CheckpointData other_seed = Fitting();
  other_seed.data.seed = 3;
  ASSERT_TRUE(SaveCheckpoint(path, other_seed).ok());
  std::vector<float> params(kResumeParams, 7.0f);
  AdamW adam(kResumeParams, AdamWConfig{});
  TrainState state{params.data(), kResumeParams, &adam, nullptr};
  LocalCommunicator comm;
  auto refused = Resume(path, false, Job(), comm, &state);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(params, std::vector<float>(kResumeParams, 7.0f));
  EXPECT_EQ(adam.t(), 0);

  auto missing = Resume((dir_ / "step-99.ckpt").string(), false, Job(), comm, &state);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), common::Code::kNotFound);

  const std::string garbage = (dir_ / "garbage.ckpt").string();
  ASSERT_TRUE(common::WriteFileAtomic(garbage, "not a checkpoint").ok());
  auto bad = Resume(garbage, false, Job(), comm, &state);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(params, std::vector<float>(kResumeParams, 7.0f));
}

}  // namespace
}  // namespace engine
