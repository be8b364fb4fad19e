#include "controlplane/http/ready_check.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

namespace controlplane::http {
namespace {

TEST(CachedCheckTest, RunsAtMostOncePerTtlAndFollowsTheAnswer) {
  double now = 100;
  int calls = 0;
  common::Status answer = common::Status::Ok();
  CachedCheck check([&] { ++calls; return answer; }, 1.0, [&] { return now; });
  EXPECT_TRUE(check.Get().ok());
  answer = common::Unavailable("database unavailable, retry");
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(check.Get().ok());  // cached
  EXPECT_EQ(calls, 1);
  now += 1.0;
  EXPECT_EQ(check.Get().code(), common::Code::kUnavailable);
  EXPECT_EQ(calls, 2);
  now += 0.5;
  EXPECT_EQ(check.Get().code(), common::Code::kUnavailable);  // still cached
  answer = common::Status::Ok();
  now += 0.6;
  EXPECT_TRUE(check.Get().ok());
  EXPECT_EQ(calls, 3);
}

// A probe that arrives while the check runs does not wait for it, nor start another.
TEST(CachedCheckTest, ConcurrentCallersDoNotQueueBehindARunningCheck) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> calls{0};
  std::atomic<double> now{0};
  CachedCheck check(
      [&] {
        calls++;
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return release; });
        return common::Status::Ok();
      },
      1.0, [&] { return now.load(); });
  std::thread first([&] { EXPECT_TRUE(check.Get().ok()); });
  while (calls.load() == 0) std::this_thread::yield();
  // No answer yet: in progress, said at once.
  EXPECT_EQ(check.Get().code(), common::Code::kUnavailable);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  first.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(check.Get().ok());
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace controlplane::http
