#include "agent/jobs/rank_logs.h"

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "agent/testing/test_util.h"

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
  logs.AddJob(1, job_dir_, job_dir_, 4);
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
  logs.AddJob(1, job_dir_, job_dir_, 4);
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
  logs.AddJob(1, job_dir_, job_dir_, 4, std::nullopt, 2, {{-1, 100}, {0, 40}});
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
  logs.AddJob(1, job_dir_, job_dir_, 4);
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
  logs.AddJob(1, job_dir_, job_dir_, 4);
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
  logs.AddJob(1, job_dir_, job_dir_, 4);
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
  logs.AddJob(1, job_dir_, job_dir_, 4);
  logs.CollectAll();
  EXPECT_EQ(ReadAll(RankLogs::RankLogPath(job_dir_, 3)), "deep\n");
}

TEST_F(RankLogsTest, OnlyTheJobsOwnRanksAreDiscovered) {
  // A hostile job makes rank directories far beyond its world size (here 2): none is a log.
  for (int r = 2; r < 20'000; r += 1) {
    ASSERT_TRUE(common::MakeDirs(job_dir_ + "/ranks/rank." + std::to_string(r)).ok());
    if (r % 1000 == 0) AppendTo(Out(r), "forged\n");
  }
  AppendTo(Out(0), "real 0\n");
  AppendTo(Out(1), "real 1\n");
  RankLogs logs;
  logs.AddJob(1, job_dir_, job_dir_, 2);
  logs.CollectAll();
  auto batch = logs.NextBatch();
  ASSERT_EQ(batch.chunks.size(), 2u);
  EXPECT_EQ(batch.chunks[0].data, "real 0\n");
  EXPECT_EQ(batch.chunks[1].data, "real 1\n");
  EXPECT_FALSE(std::filesystem::exists(RankLogs::RankLogPath(job_dir_, 1000)));
}

TEST_F(RankLogsTest, BatchesHoldBoundedChunksAndTakeEveryFileInTurn) {
  const int ranks = 1500;
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(common::MakeDirs(job_dir_ + "/ranks/rank." + std::to_string(r)).ok());
    AppendTo(Out(r), "line of " + std::to_string(r) + "\n");
  }
  RankLogs logs;
  logs.AddJob(1, job_dir_, job_dir_, ranks);
  logs.CollectAll();
  logs.MarkFinished(1);
  std::set<int> shipped;
  int batches = 0;
  for (; batches < 10; ++batches) {
    auto batch = logs.NextBatch();
    if (batch.chunks.empty()) break;
    EXPECT_LE(batch.chunks.size(), RankLogs::kMaxBatchChunks);
    // Not complete while some of its files wait for a later batch.
    if (shipped.size() + batch.chunks.size() < static_cast<size_t>(ranks)) {
      EXPECT_EQ(batch.complete_jobs.count(1), 0u);
    }
    for (const auto& c : batch.chunks) {
      EXPECT_EQ(c.data, "line of " + std::to_string(c.rank) + "\n");
      shipped.insert(c.rank);
    }
    logs.Commit(batch.chunks);
  }
  EXPECT_EQ(shipped.size(), static_cast<size_t>(ranks));
  EXPECT_EQ(batches, 3);  // ceil(1500 / 512)
}

TEST_F(RankLogsTest, OutputOverTheRateCapIsDroppedWithAMarker) {
  RankLogs logs(RankLogs::kDefaultBatchBytes, {.bytes_per_s = 1000, .burst_bytes = 1000,
                                               .total_bytes = int64_t{1} << 30});
  logs.AddJob(1, job_dir_, job_dir_, 2);
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "123456789\n";  // 10,000 bytes
  AppendTo(Out(0), lines);
  logs.Collect(1, false);
  const std::string got = ReadAll(RankLogs::RankLogPath(job_dir_, 0));
  EXPECT_EQ(got.substr(0, 1000), lines.substr(0, 1000));
  EXPECT_NE(got.find("[embody: dropped 9000 bytes of this rank's output"), std::string::npos)
      << got;
  EXPECT_LT(got.size(), 1200u);
}

TEST_F(RankLogsTest, OutputPastTheTotalCapIsDroppedAfterOneMarker) {
  RankLogs logs(RankLogs::kDefaultBatchBytes,
                {.bytes_per_s = 1 << 30, .burst_bytes = 1 << 30, .total_bytes = 500});
  logs.AddJob(1, job_dir_, job_dir_, 2);
  std::string lines;
  for (int i = 0; i < 100; ++i) lines += "123456789\n";  // 1,000 bytes
  AppendTo(Out(0), lines);
  logs.Collect(1, false);
  std::string got = ReadAll(RankLogs::RankLogPath(job_dir_, 0));
  EXPECT_EQ(got.substr(0, 500), lines.substr(0, 500));
  EXPECT_NE(got.find("reached their cap"), std::string::npos) << got;
  const size_t size = got.size();
  AppendTo(Out(0), lines);
  AppendTo(Err(1), lines);
  logs.Collect(1, true);
  EXPECT_EQ(ReadAll(RankLogs::RankLogPath(job_dir_, 0)).size(), size) << "kept past the cap";
  EXPECT_EQ(ReadAll(RankLogs::RankLogPath(job_dir_, 1)), "");
}

}  // namespace
}  // namespace agent
