// The preparer alone, with stand-in fetch functions: which launches need a fetch, where each
// input lands and how the launch is rewritten to read it, and the end reasons a failed fetch
// gives its job. No process is started.
#include "agent/jobs/job_preparer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/file_util.h"

namespace agent {
namespace {

using nlohmann::json;

class JobPreparerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/embody-preparer-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    options_.jobs.data_dir = dir_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static mode_t ModeOf(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  static json UploadSpec() {
    return {
        {"kind", "import"},
        {"import",
         {{"dataset_id", 9},
          {"source",
           {{"format", "hdf5"}, {"upload", {{"bytes", 5}, {"sha256", std::string(64, 'b')}}}}}}}};
  }

  std::string dir_;
  JobRunnerOptions options_;
};

TEST_F(JobPreparerTest, ACheckpointIsFetchedUnlessTheJobsOwnIsHereAndAsNew) {
  JobPreparer preparer(options_);
  api::Command launch;
  launch.job_id = 5;
  launch.spec = {{"kind", "train"}};
  launch.resume_checkpoint = {.id = 11, .job_id = 5, .step = 20};
  // No way to fetch: the checkpoint is ignored.
  EXPECT_FALSE(preparer.NeedsFetch(launch));
  options_.fetch_checkpoint = [](const api::CheckpointRef&, const std::string&) {
    return common::Status::Ok();
  };
  EXPECT_TRUE(preparer.NeedsFetch(launch));
  // The job's own file at resume_from, as new as the uploaded one and readable here, wins.
  const std::string own = dir_ + "/step-20.ckpt";
  ASSERT_TRUE(common::WriteFileAtomic(own, "ckpt", 0644).ok());
  launch.resume_from = own;
  EXPECT_FALSE(preparer.NeedsFetch(launch));
  launch.resume_checkpoint.step = 30;  // the server's is newer
  EXPECT_TRUE(preparer.NeedsFetch(launch));
  launch.resume_checkpoint = {.id = 11, .job_id = 4, .step = 20};  // another job's
  EXPECT_TRUE(preparer.NeedsFetch(launch));
  launch.resume_checkpoint = {};
  EXPECT_FALSE(preparer.NeedsFetch(launch));
}

TEST_F(JobPreparerTest, TheFetchedCheckpointIsWhatTheJobResumesFrom) {
  std::string written_to;
  options_.fetch_checkpoint = [&](const api::CheckpointRef& ref, const std::string& path) {
    written_to = path;
    return common::WriteFileAtomic(path, "step " + std::to_string(ref.step), 0644);
  };
  JobPreparer preparer(options_);
  api::Command launch;
  launch.job_id = 5;
  launch.resume_checkpoint = {.id = 11, .job_id = 3, .step = 20};
  JobPreparer::Fetched f = preparer.Fetch(5, launch, [] { return false; });
  ASSERT_TRUE(f.status.ok()) << f.status.ToString();
  const std::string dir = options_.jobs.DownloadDir(5);
  EXPECT_EQ(written_to, dir + "/step-20.ckpt");
  EXPECT_EQ(f.launch.resume_from, written_to);
  EXPECT_EQ(ModeOf(dir), 0711u);  // the job passes through to read it, and cannot replace it
  EXPECT_TRUE(f.upload_fetched.empty());
}

TEST_F(JobPreparerTest, AFailedCheckpointFetchGivesTheJobsEndReason) {
  options_.fetch_checkpoint = [](const api::CheckpointRef&, const std::string&) {
    return common::Unavailable("server down");
  };
  JobPreparer preparer(options_);
  api::Command launch;
  launch.job_id = 5;
  launch.resume_checkpoint = {.id = 11, .job_id = 3, .step = 20};
  JobPreparer::Fetched f = preparer.Fetch(5, launch, [] { return false; });
  EXPECT_FALSE(f.status.ok());
  EXPECT_EQ(f.reason, "cannot fetch checkpoint 11 (step 20): server down");
  EXPECT_EQ(f.log_message, "cannot fetch checkpoint");
  EXPECT_TRUE(f.launch.resume_from.empty());
}

TEST_F(JobPreparerTest, AnUploadIsFetchedPrivatelyAndTheSpecReadsTheJobsCopy) {
  options_.fetch_upload = [](const UploadRef& ref, const std::string& path) {
    return common::WriteFileAtomic(path, std::string(static_cast<size_t>(ref.bytes), 'x'), 0600);
  };
  JobPreparer preparer(options_);
  api::Command launch;
  launch.job_id = 6;
  launch.spec = UploadSpec();
  EXPECT_TRUE(preparer.NeedsFetch(launch));
  JobPreparer::Fetched f = preparer.Fetch(6, launch, [] { return false; });
  ASSERT_TRUE(f.status.ok()) << f.status.ToString();
  EXPECT_EQ(f.upload_fetched, options_.jobs.DownloadDir(6) + "/upload.hdf5");
  EXPECT_EQ(f.upload_copy, options_.jobs.JobDir(6) + "/upload.hdf5");
  EXPECT_EQ(ModeOf(options_.jobs.DownloadDir(6)), 0700u);  // root's until it is the job's
  EXPECT_FALSE(UploadOf(f.launch.spec));
  EXPECT_EQ(f.launch.spec["import"]["source"]["path"], f.upload_copy);
}

TEST_F(JobPreparerTest, AFailedUploadFetchStillNamesWhatToRemove) {
  JobPreparer without(options_);
  api::Command launch;
  launch.job_id = 6;
  launch.spec = UploadSpec();
  EXPECT_FALSE(without.NeedsFetch(launch));  // this agent fetches no uploads
  options_.fetch_upload = [](const UploadRef&, const std::string&) {
    return common::InvalidArgument("sha256 mismatch");
  };
  JobPreparer preparer(options_);
  JobPreparer::Fetched f = preparer.Fetch(6, launch, [] { return false; });
  EXPECT_FALSE(f.status.ok());
  EXPECT_EQ(f.reason, "cannot fetch the upload of dataset 9: sha256 mismatch");
  EXPECT_EQ(f.log_message, "cannot fetch dataset upload");
  EXPECT_EQ(f.upload_fetched, options_.jobs.DownloadDir(6) + "/upload.hdf5");
  EXPECT_TRUE(UploadOf(f.launch.spec));  // not rewritten
}

TEST_F(JobPreparerTest, ANodeWithoutAnImageCacheRefusesImageJobs) {
  JobPreparer preparer(options_);
  auto use = preparer.AcquireImage(7, ImageRef{"policy-env@1", dir_, "sha256:00"});
  ASSERT_FALSE(use.ok());
  EXPECT_EQ(use.status().message(),
            "cannot prepare image policy-env@1: this node runs no images (its agent has no image "
            "cache)");
}

}  // namespace
}  // namespace agent
