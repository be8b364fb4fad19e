// CheckpointUploader: what a job reports is uploaded with its step's metrics, and nothing outside
// the job's own checkpoint directory is ever read, whatever path the job claims.
#include "agent/data/checkpoint_uploader.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "storage/checkpoint_http_store.h"
#include "storage/testing/fake_blob_server.h"

namespace agent {
namespace {

using nlohmann::json;

class CheckpointUploaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-uploader-XXXXXX";
    root_ = mkdtemp(tmpl.data());
    ASSERT_TRUE(common::MakeDirs(root_ + "/checkpoints/job-7").ok());
    ASSERT_TRUE(common::MakeDirs(root_ + "/checkpoints/job-8").ok());
    storage::HttpCheckpointStoreOptions o;
    o.server_url = server_.url();
    o.max_retries = 0;
    store_ = std::make_unique<storage::HttpCheckpointStore>(o);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string Dir(int job) { return root_ + "/checkpoints/job-" + std::to_string(job); }

  storage::testing::FakeBlobServer server_;
  std::string root_;
  std::unique_ptr<storage::HttpCheckpointStore> store_;
};

TEST_F(CheckpointUploaderTest, UploadsReportedCheckpointsWithTheirStepMetrics) {
  CheckpointUploader up({root_ + "/checkpoints"}, store_.get());
  ASSERT_TRUE(common::WriteFileAtomic(Dir(7) + "/step-25.ckpt", "weights").ok());
  up.Observe(7, {{"type", "step"}, {"step", 25}, {"steps", 100}, {"loss", 0.5}, {"phase", "x"}});
  up.Observe(7, {{"type", "checkpoint"}, {"step", 25}, {"path", Dir(7) + "/step-25.ckpt"}});
  ASSERT_TRUE(up.WaitIdle(std::chrono::seconds(10)));
  EXPECT_EQ(up.uploaded(), 1u);
  auto list = store_->List(7);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].step, 25);
  EXPECT_EQ((*list)[0].metrics, (json{{"loss", 0.5}}));
}

TEST_F(CheckpointUploaderTest, RefusesPathsOutsideTheJobsDirectoryAndLinks) {
  CheckpointUploader up({root_ + "/checkpoints"}, store_.get());
  ASSERT_TRUE(common::WriteFileAtomic(root_ + "/node.token", "secret").ok());
  ASSERT_TRUE(common::WriteFileAtomic(Dir(8) + "/step-1.ckpt", "other job's").ok());
  ASSERT_EQ(::symlink((root_ + "/node.token").c_str(), (Dir(7) + "/step-2.ckpt").c_str()), 0);
  ASSERT_TRUE(common::MakeDirs(Dir(7) + "/sub").ok());
  ASSERT_TRUE(common::WriteFileAtomic(Dir(7) + "/sub/step-3.ckpt", "nested").ok());
  const std::vector<std::string> bad = {
      root_ + "/node.token",             // outside
      Dir(8) + "/step-1.ckpt",           // another job's
      Dir(7) + "/../job-8/step-1.ckpt",  // the same, by ..
      Dir(7) + "/step-2.ckpt",           // a link to a secret
      Dir(7) + "/sub/step-3.ckpt",       // not directly in the directory
      "step-1.ckpt",                     // relative
      Dir(7),                            // the directory itself
  };
  for (const auto& path : bad) {
    EXPECT_FALSE(up.UploadNow(7, 1, path, json::object()).ok()) << path;
  }
  EXPECT_EQ(server_.Uploads().size(), 0u);
  // Queued through Observe, they fail the same way and are counted.
  for (const auto& path : bad) up.Observe(7, {{"type", "checkpoint"}, {"step", 1}, {"path", path}});
  ASSERT_TRUE(up.WaitIdle(std::chrono::seconds(10)));
  EXPECT_EQ(up.failed(), bad.size());
  EXPECT_EQ(server_.Uploads().size(), 0u);
}

TEST_F(CheckpointUploaderTest, MetricsKeepOnlyFiniteNumbersUnderValidNames) {
  json m = CheckpointMetrics({{"type", "step"},
                              {"step", 3},
                              {"loss", 1.5},
                              {"Bad-Name", 1},
                              {"note", "text"},
                              {"tokens_per_s", 100}});
  EXPECT_EQ(m, (json{{"loss", 1.5}, {"tokens_per_s", 100}}));
}

}  // namespace
}  // namespace agent
