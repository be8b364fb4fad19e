#include "agent/rank_logs.h"

#include <gtest/gtest.h>

#include "agent/test_util.h"

namespace agent {
namespace {

class RankLogsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_dir_ = dir_.path() + "/jobs/job-1";
    ASSERT_TRUE(common::MakeDirs(job_dir_ + "/ranks/rank.0").ok());
    ASSERT_TRUE(common::MakeDirs(job_dir_ + "/ranks/rank.1").ok());
  }
  std::string Out(int rank) { return job_dir_ + "/ranks/rank." + std::to_string(rank) + "/stdout"; }
  std::string Err(int rank) { return job_dir_ + "/ranks/rank." + std::to_string(rank) + "/stderr"; }

  TempDir dir_;
  std::string job_dir_;
};

TEST_F(RankLogsTest, FoldsWholeLinesOfBothStreams) {
  RankLogs logs;
  logs.AddJob(1, job_dir_, job_dir_);
  AppendTo(Out(0), "out line\npartial");
  AppendTo(Err(0), "err line\n");
  logs.Collect(1, false);
  EXPECT_EQ(ReadAll(RankLogs::RankLogPath(job_dir_, 0)), "out line\nerr line\n");
  AppendTo(Out(0), " done\n");
  logs.Collect(1, false);
  EXPECT_EQ(ReadAll(RankLogs::RankLogPath(job_dir_, 0)), "out line\nerr line\npartial done\n");
  AppendTo(Err(0), "no newline at exit");
  logs.Collect(1, true);
  EXPECT_EQ(ReadAll(RankLogs::RankLogPath(job_dir_, 0)),
            "out line\nerr line\npartial done\nno newline at exit");
}

TEST_F(RankLogsTest, ShipsFromAcknowledgedOffsetsAndResendsOnFailure) {
  RankLogs logs;
  logs.AddJob(1, job_dir_, job_dir_);
  AppendTo(Out(0), "a0\n");
  AppendTo(Out(1), "b1\n");
  AppendTo(RankLogs::RankLogPath(job_dir_, -1), "launcher\n");
  logs.CollectAll();
  auto b1 = logs.NextBatch();
  ASSERT_EQ(b1.chunks.size(), 3u);
  EXPECT_EQ(b1.chunks[0].rank, -1);
  EXPECT_EQ(b1.chunks[0].data, "launcher\n");
  EXPECT_EQ(b1.chunks[1].rank, 0);
  EXPECT_EQ(b1.chunks[1].data, "a0\n");
  EXPECT_EQ(b1.chunks[2].rank, 1);
  // Not committed (heartbeat failed): the same bytes come again.
  auto b2 = logs.NextBatch();
  ASSERT_EQ(b2.chunks.size(), 3u);
  EXPECT_EQ(b2.chunks[1].offset, 0);
  logs.Commit(b2.chunks);
  EXPECT_TRUE(logs.NextBatch().chunks.empty());
  AppendTo(Out(0), "a0 again\n");
  logs.CollectAll();
  auto b3 = logs.NextBatch();
  ASSERT_EQ(b3.chunks.size(), 1u);
  EXPECT_EQ(b3.chunks[0].offset, 3);
  EXPECT_EQ(b3.chunks[0].data, "a0 again\n");
}

// A job run again under the same attempt (preempted, then placed again) continues that attempt's
// logs on the server after the bytes it holds, rank by rank; ranks it holds nothing of start at 0.
TEST_F(RankLogsTest, ARunAgainUnderTheSameAttemptFollowsTheBytesTheServerHolds) {
  RankLogs logs;
  logs.AddJob(1, job_dir_, job_dir_, std::nullopt, 2, {{-1, 100}, {0, 40}});
  AppendTo(Out(0), "a0\n");
  AppendTo(Out(1), "b1\n");
  AppendTo(RankLogs::RankLogPath(job_dir_, -1), "resuming\n");
  logs.CollectAll();
  auto b = logs.NextBatch();
  ASSERT_EQ(b.chunks.size(), 3u);
  EXPECT_EQ(b.chunks[0].offset, 100);
  EXPECT_EQ(b.chunks[0].data, "resuming\n");
  EXPECT_EQ(b.chunks[0].attempt, 2);
  EXPECT_EQ(b.chunks[1].offset, 40);
  EXPECT_EQ(b.chunks[2].offset, 0);
  logs.Commit(b.chunks);
  EXPECT_TRUE(logs.NextBatch().chunks.empty());
  AppendTo(Out(0), "more\n");
  logs.CollectAll();
  b = logs.NextBatch();
  ASSERT_EQ(b.chunks.size(), 1u);
  EXPECT_EQ(b.chunks[0].offset, 43);
}

TEST_F(RankLogsTest, BatchIsBoundedAndShared) {
  RankLogs logs(/*max_batch_bytes=*/100);
  logs.AddJob(1, job_dir_, job_dir_);
  AppendTo(Out(0), std::string(300, 'x') + "\n");
  AppendTo(Out(1), "short\n");
  logs.CollectAll();
  auto b = logs.NextBatch();
  size_t total = 0;
  for (const auto& c : b.chunks) total += c.data.size();
  EXPECT_EQ(total, 100u);
  ASSERT_EQ(b.chunks.size(), 2u);
  EXPECT_EQ(b.chunks[1].data, "short\n");  // the small rank is not starved
  // Drain in several heartbeats; offsets are contiguous.
  std::string rank0;
  for (int i = 0; i < 10; ++i) {
    for (const auto& c : b.chunks) {
      if (c.rank == 0) {
        EXPECT_EQ(c.offset, static_cast<int64_t>(rank0.size()));
        rank0 += c.data;
      }
    }
    logs.Commit(b.chunks);
    b = logs.NextBatch();
  }
  EXPECT_EQ(rank0, std::string(300, 'x') + "\n");
}

TEST_F(RankLogsTest, FinishedJobIsCompleteOnlyWhenAllBytesAreInTheBatch) {
  RankLogs logs(/*max_batch_bytes=*/10);
  logs.AddJob(1, job_dir_, job_dir_);
  AppendTo(Out(0), "0123456789abcdef\n");
  logs.Collect(1, true);
  logs.MarkFinished(1);
  auto b = logs.NextBatch();
  EXPECT_EQ(b.complete_jobs.count(1), 0u);
  logs.Commit(b.chunks);
  b = logs.NextBatch();
  EXPECT_EQ(b.complete_jobs.count(1), 1u);
  logs.Commit(b.chunks);
  EXPECT_FALSE(logs.Tracking(1));  // everything acknowledged: dropped
}

TEST_F(RankLogsTest, NeverSplitsAUtf8Character) {
  RankLogs logs(/*max_batch_bytes=*/4);
  logs.AddJob(1, job_dir_, job_dir_);
  AppendTo(Out(0), "ab\xC3\xA9\xC3\xA9\n");  // "abéé\n"
  logs.Collect(1, false);
  auto b = logs.NextBatch();
  ASSERT_EQ(b.chunks.size(), 1u);
  EXPECT_EQ(b.chunks[0].data, "ab\xC3\xA9");
  logs.Commit(b.chunks);
  b = logs.NextBatch();
  EXPECT_EQ(b.chunks[0].data, "\xC3\xA9\n");
}

TEST_F(RankLogsTest, FindsRanksUnderAJobIdDirectoryToo) {
  ASSERT_TRUE(common::MakeDirs(job_dir_ + "/ranks/1/rank.3").ok());
  AppendTo(job_dir_ + "/ranks/1/rank.3/stdout", "deep\n");
  RankLogs logs;
  logs.AddJob(1, job_dir_, job_dir_);
  logs.CollectAll();
  EXPECT_EQ(ReadAll(RankLogs::RankLogPath(job_dir_, 3)), "deep\n");
}

}  // namespace
}  // namespace agent
