// Read-ahead: order, the bound on items read ahead, errors in place, and a clean stop.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "storage/dataset_reader.h"
#include "storage/dataset_writer.h"
#include "storage/partition.h"
#include "storage/read_ahead.h"
#include "storage/testing/episodes.h"
#include "storage/testing/robomimic_file.h"

namespace storage {
namespace {

using namespace std::chrono_literals;

TEST(ReadAheadTest, DeliversInOrderFromManyThreads) {
  ReadAhead<uint64_t> ra(500,
                         [](uint64_t i) -> common::Result<uint64_t> {
                           if (i % 7 == 0)
                             std::this_thread::sleep_for(std::chrono::microseconds(200));
                           return i * i;
                         },
                         {.threads = 4, .capacity = 8});
  for (uint64_t i = 0; i < 500; ++i) {
    auto v = ra.Next();
    ASSERT_TRUE(v.ok());
    ASSERT_TRUE(v->has_value());
    EXPECT_EQ(**v, i * i);
  }
  auto end = ra.Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST(ReadAheadTest, ReadsAtMostCapacityAheadOfTheConsumer) {
  std::atomic<int> reads{0};
  ReadAhead<int> ra(1000,
                    [&](uint64_t i) -> common::Result<int> { return ++reads, static_cast<int>(i); },
                    {.threads = 3, .capacity = 5});
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(reads.load(), 5);  // filled the buffer, then waited
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(ra.Next().ok());
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(reads.load(), 15);
  EXPECT_LE(ra.claimed(), 15u);
}

TEST(ReadAheadTest, ConsumerDoesNotWaitWhenReadsKeepUp) {
  ReadAhead<int> ra(50, [](uint64_t i) -> common::Result<int> { return static_cast<int>(i); },
                    {.threads = 2, .capacity = 50});
  std::this_thread::sleep_for(50ms);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(ra.Next().ok());
  EXPECT_EQ(ra.waits(), 0u);
}

TEST(ReadAheadTest, ErrorArrivesInItsPlaceAndEndsTheStream) {
  ReadAhead<int> ra(100,
                    [](uint64_t i) -> common::Result<int> {
                      if (i == 20)
                        return common::FailedPrecondition("shard-00000.embs: checksum mismatch");
                      return static_cast<int>(i);
                    },
                    {.threads = 4, .capacity = 16});
  for (int i = 0; i < 20; ++i) {
    auto v = ra.Next();
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(**v, i);
  }
  auto bad = ra.Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("checksum"), std::string::npos);
  auto after = ra.Next();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
}

TEST(ReadAheadTest, StopsCleanlyMidStream) {
  std::atomic<int> in_flight{0}, reads{0};
  auto ra = std::make_unique<ReadAhead<int>>(
      100000,
      [&](uint64_t i) -> common::Result<int> {
        ++in_flight;
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        ++reads;
        --in_flight;
        return static_cast<int>(i);
      },
      ReadAheadOptions{.threads = 4, .capacity = 64});
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(ra->Next().ok());
  ra->Stop();
  EXPECT_EQ(in_flight.load(), 0);  // every worker joined
  int after_stop = reads.load();
  EXPECT_LE(after_stop, 30 + 64 + 4);
  auto v = ra->Next();
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
  ra->Stop();  // idempotent
  ra.reset();  // and destruction after Stop is fine
  EXPECT_EQ(reads.load(), after_stop);
}

TEST(ReadAheadTest, DestroyingAStreamWithAFullBufferJoins) {
  auto ra = std::make_unique<ReadAhead<std::vector<int>>>(
      1000, [](uint64_t i) -> common::Result<std::vector<int>> { return std::vector<int>(100, i); },
      ReadAheadOptions{.threads = 2, .capacity = 4});
  std::this_thread::sleep_for(10ms);
  ra.reset();  // workers blocked on a full buffer wake and exit
  SUCCEED();
}

TEST(ReadAheadTest, StreamsARanksSamplesOfADataset) {
  std::string root = testing::MakeTempDir("read_ahead_test");
  {
    DatasetWriterOptions o;
    o.shard_bytes = 4 << 10;
    o.shard.chunk_bytes = 512;
    auto w = DatasetWriter::Create(root + "/ds", o);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 6; ++i) ASSERT_TRUE((*w)->Add(testing::MakeEpisode(i, 10 + i), "ep").ok());
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  auto ds = Dataset::Open(root + "/ds");
  ASSERT_TRUE(ds.ok());
  for (int rank = 0; rank < 2; ++rank) {
    auto part = Partition((*ds)->samples(), {.seed = 1, .epoch = 0, .world = 2, .rank = rank});
    ASSERT_TRUE(part.ok());
    auto stream = StreamSamples(**ds, *part, {.threads = 3, .capacity = 8});
    for (uint64_t want : *part) {
      auto s = stream->Next();
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      ASSERT_TRUE(s->has_value());
      EXPECT_EQ((*s)->index, want);
      auto direct = (*ds)->ReadSample(want);
      ASSERT_TRUE(direct.ok());
      EXPECT_EQ((*s)->values[1].data, direct->values[1].data);
    }
    EXPECT_FALSE(stream->Next()->has_value());
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace storage
