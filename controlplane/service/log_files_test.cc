#include "controlplane/service/log_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace controlplane::service {
namespace {

class LogFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/embody-logs-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(LogFilesTest, AppendIsIdempotentOnRetries) {
  LogFiles files(dir_);
  EXPECT_EQ(*files.Append({7, 0, 0, "hello ", 0}), 6);
  EXPECT_EQ(*files.Append({7, 0, 0, "hello ", 0}), 6);        // the same chunk again
  EXPECT_EQ(*files.Append({7, 0, 3, "lo world\n", 0}), 12);   // overlaps what is there
  EXPECT_EQ(*LogFiles::Read(files.PathFor(7, 0, 0), 0, 100), "hello world\n");
  EXPECT_EQ(*files.Append({7, 0, 20, "after gap\n", 0}), 22);  // lost bytes: appended anyway
  EXPECT_EQ(files.PathFor(7, 0, -1), dir_ + "/logs/job-7/attempt-0/launcher.log");
}

TEST_F(LogFilesTest, EachAttemptHasFilesOfItsOwnFromOffsetZero) {
  LogFiles files(dir_);
  ASSERT_TRUE(files.Append({7, 0, 0, "first\n", 0}).ok());
  EXPECT_EQ(*files.Append({7, 0, 0, "second\n", 1}), 7);
  EXPECT_EQ(*LogFiles::Read(files.PathFor(7, 0, 0), 0, 100), "first\n");
  EXPECT_EQ(*LogFiles::Read(files.PathFor(7, 1, 0), 0, 100), "second\n");
  EXPECT_EQ(files.PathFor(7, 1, 0), files.JobDir(7) + "/attempt-1/rank-0.log");
  // The caller says whose attempt a chunk is: one without is refused, never guessed.
  EXPECT_FALSE(files.Append({7, 0, 0, "whose?\n"}).ok());
}

TEST_F(LogFilesTest, MergerPrefixesWholeLines) {
  LogFiles files(dir_);
  ASSERT_TRUE(files.Append({1, 0, 0, "a1\na2", 0}).ok());
  ASSERT_TRUE(files.Append({1, -1, 0, "launch\n", 0}).ok());
  std::vector<LogRecord> logs = {{-1, files.PathFor(1, 0, -1), 0}, {0, files.PathFor(1, 0, 0), 0}};
  LogMerger m;
  EXPECT_EQ(*m.Poll(logs, false), "[launcher] launch\n[rank 0] a1\n");
  ASSERT_TRUE(files.Append({1, 0, 5, "+\n", 0}).ok());
  EXPECT_EQ(*m.Poll(logs, false), "[rank 0] a2+\n");
  ASSERT_TRUE(files.Append({1, 0, 7, "tail", 0}).ok());
  EXPECT_EQ(*m.Poll(logs, true), "[rank 0] tail\n");
  EXPECT_EQ(*m.Poll(logs, true), "");
}

}  // namespace
}  // namespace controlplane::service
