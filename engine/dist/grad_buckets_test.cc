// GradBuckets in one process: bucket layout, launch order and the scaling arithmetic, against a
// communicator that records what it is asked to do. The multi-rank results (equal to a plain
// all-reduce, equal to the gradient of the global mean) are checked under MPI in
// grad_buckets_mpi_test.cc.
#include "engine/dist/grad_buckets.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace engine {
namespace {

// A world of one whose nonblocking collectives complete only after `test_calls_to_finish` Test
// calls, recording each start as (offset into the gradient buffer, count).
class RecordingCommunicator final : public Communicator {
 public:
  explicit RecordingCommunicator(const float* base) : base_(base) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void AllreduceMean(float*, size_t) override {}
  double AllreduceSum(double x) override { return x; }
  double AllreduceMax(double x) override { return x; }
  CollectiveId StartAllreduceSum(float* data, size_t n) override {
    starts.push_back({static_cast<size_t>(data - base_), n});
    pending.push_back(test_calls_to_finish);
    return static_cast<CollectiveId>(pending.size() - 1);
  }
  CollectiveId StartAllreduceSum(double*, size_t) override {
    pending.push_back(0);
    return static_cast<CollectiveId>(pending.size() - 1);
  }
  bool Test(CollectiveId id) override {
    ++tests;
    if (pending[id] > 0) --pending[id];
    return pending[id] == 0;
  }
  void Wait(CollectiveId id) override { pending[id] = 0; }
  CollectiveId StartAlltoallBytes(const uint8_t* send, uint8_t* recv, size_t bytes) override {
    std::copy(send, send + bytes, recv);
    pending.push_back(0);
    return static_cast<CollectiveId>(pending.size() - 1);
  }
  CollectiveId StartAllgatherBytes(const uint8_t* send, uint8_t* recv, size_t bytes) override {
    return StartAlltoallBytes(send, recv, bytes);
  }
  void BroadcastBytes(std::string*, int) override {}
  void GatherFloats(const float* mine, size_t n, std::vector<float>* all, int) override {
    all->assign(mine, mine + n);
  }
  std::unique_ptr<Communicator> Split(int) override {
    return std::make_unique<LocalCommunicator>();
  }
  void SendBytes(int, int, std::string) override {}
  bool TryReceiveBytes(int, std::string*, int*) override { return false; }
  void FlushSends() override {}

  std::vector<std::pair<size_t, size_t>> starts;
  std::vector<int> pending;
  int tests = 0;
  int test_calls_to_finish = 0;

 private:
  const float* base_;
};

TEST(GradBucketsTest, BucketsCoverTheBufferInReverseOrder) {
  std::vector<float> g(1000);
  LocalCommunicator comm;
  GradBuckets b(comm, g.data(), g.size(), GradBucketOptions{256 * sizeof(float)});
  ASSERT_EQ(b.num_buckets(), 4u);
  EXPECT_EQ(b.bucket_end(0), 1000u);
  EXPECT_EQ(b.bucket_begin(0), 744u);
  for (size_t k = 1; k < b.num_buckets(); ++k) EXPECT_EQ(b.bucket_end(k), b.bucket_begin(k - 1));
  EXPECT_EQ(b.bucket_begin(3), 0u);
  EXPECT_EQ(b.bucket_end(3) - b.bucket_begin(3), 1000u - 3 * 256);
}

TEST(GradBucketsTest, LaunchesEachBucketOnceCompleteAndInOrder) {
  std::vector<float> g(1000, 1.0f);
  RecordingCommunicator comm(g.data());
  GradBuckets b(comm, g.data(), g.size(), GradBucketOptions{256 * sizeof(float)});
  b.Begin(4.0, 0.5);
  b.MarkReady(900, 1000);  // part of bucket 0
  EXPECT_TRUE(comm.starts.empty());
  b.MarkReady(488, 744);  // all of bucket 1, but bucket 0 is not complete: nothing may start
  EXPECT_TRUE(comm.starts.empty());
  b.MarkReady(744, 900);  // completes bucket 0: buckets 0 and 1 start, in that order
  ASSERT_EQ(comm.starts.size(), 2u);
  EXPECT_EQ(comm.starts[0], (std::pair<size_t, size_t>{744, 256}));
  EXPECT_EQ(comm.starts[1], (std::pair<size_t, size_t>{488, 256}));
  b.MarkReady(0, 488);  // rest
  ASSERT_EQ(comm.starts.size(), 4u);
  EXPECT_EQ(comm.starts[3], (std::pair<size_t, size_t>{0, 232}));
  const GlobalStepTotals t = b.Finish();
  EXPECT_EQ(t.weight, 4.0);
  EXPECT_EQ(t.loss, 0.5);
  for (float x : g) ASSERT_EQ(x, 1.0f);  // (1 × 4) × (1/4)
}

TEST(GradBucketsTest, MarkReadyDrivesProgressAndFinishLaunchesUnmarked) {
  std::vector<float> g(1024, 2.0f);
  RecordingCommunicator comm(g.data());
  comm.test_calls_to_finish = 2;
  GradBuckets b(comm, g.data(), g.size(), GradBucketOptions{256 * sizeof(float)});
  b.Begin(1.0, 0.0);
  b.MarkReady(768, 1024);  // bucket 0 starts and is tested once
  EXPECT_EQ(comm.tests, 1);
  b.Poll();  // second test: complete
  b.MarkReady(512, 768);
  EXPECT_EQ(comm.starts.size(), 2u);
  b.Finish();  // buckets 2 and 3 were never marked: Finish starts them
  EXPECT_EQ(comm.starts.size(), 4u);
  EXPECT_EQ(b.completed_before_finish(), 1u);
  for (float x : g) ASSERT_EQ(x, 2.0f);
  // The next step starts from scratch.
  b.Begin(1.0, 0.0);
  b.MarkReady(0, 1024);
  EXPECT_EQ(comm.starts.size(), 8u);
  b.Finish();
}

TEST(GradBucketsTest, WeightingArithmeticAndZeroWeight) {
  std::vector<float> g = {1.0f, -3.0f, 0.1f};
  LocalCommunicator comm;
  GradBuckets b(comm, g.data(), g.size());
  b.Begin(3.0, 2.0);
  b.MarkReady(0, 3);
  GlobalStepTotals t = b.Finish();
  EXPECT_EQ(t.weight, 3.0);
  EXPECT_DOUBLE_EQ(t.loss, 2.0);
  const float inv = static_cast<float>(1.0 / 3.0);
  EXPECT_EQ(g[2], (0.1f * 3.0f) * inv);

  // No real tokens: NaN loss and NaN gradients from an empty batch are ignored.
  g = {NAN, 1.0f, 2.0f};
  b.Begin(0.0, NAN);
  t = b.Finish();
  EXPECT_EQ(t.weight, 0.0);
  EXPECT_EQ(t.loss, 0.0);
  for (float x : g) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace engine
