// Held heartbeats (NodeService::Heartbeat with NodeWaiters, label unit): an idle heartbeat that
// asks to wait is answered as soon as a placement on its node is notified, with the launch; one
// nothing happens to is answered after one heartbeat interval (or its own shorter wait_ms); no
// more than the waiters' limit are held at once, the rest answered at once; a heartbeat that
// reports something is never held until a command exists, though one reporting ends waits for
// the scheduling pass they woke; a wake for another node does not end the wait; stopping the
// server answers every held heartbeat.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "controlplane/service/node_service.h"
#include "controlplane/service/node_waiters.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using api::JobState;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr int kIntervalMs = 400;

class HeldHeartbeatTest : public testing::NodeServiceFixture {
 protected:
  void SetUp() override {
    NodeServiceFixture::SetUp();
    SetUpNodeService(kIntervalMs, Hooks());
    cred1_ = AddNode(*nodes_, join_, "n1", 2, &n1_);
    cred2_ = AddNode(*nodes_, join_, "n2", 2, &n2_);
  }
  // What the node service is built with: the waiters, for held heartbeats.
  virtual NodeServiceHooks Hooks() {
    NodeServiceHooks hooks;
    hooks.waiters = &waiters_;
    return hooks;
  }

  struct Answer {
    Result<api::HeartbeatResponse> reply;
    milliseconds took;
  };
  // An idle heartbeat of `node` asking to be held `wait_ms`, on its own thread.
  std::future<Answer> HeldBeat(const Principal& cred, int64_t node, int wait_ms) {
    return std::async(std::launch::async, [this, cred, node, wait_ms] {
      api::HeartbeatRequest req;
      req.has_launched = true;
      req.wait_ms = wait_ms;
      const auto t0 = SteadyClock::now();
      auto r = nodes_->Heartbeat(cred, node, req);
      return Answer{std::move(r),
                    std::chrono::duration_cast<milliseconds>(SteadyClock::now() - t0)};
    });
  }
  // Until `n` heartbeats wait (they are on other threads), or 5 s.
  bool WaitHeld(int n) {
    for (int i = 0; i < 500 && waiters_.held() != n; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    return waiters_.held() == n;
  }

  NodeWaiters waiters_{2};
  int64_t n1_ = 0, n2_ = 0;
  Principal cred1_, cred2_;
};

TEST_F(HeldHeartbeatTest, APlacementWakesTheHeldHeartbeatWithItsLaunch) {
  auto held = HeldBeat(cred1_, n1_, 60'000);
  ASSERT_TRUE(WaitHeld(1));
  const int64_t job = PlacedJob(member_, n1_);
  waiters_.Notify(std::vector<int64_t>{n1_});  // what the scheduler loop's cycle does
  ASSERT_EQ(held.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Answer a = held.get();
  ASSERT_TRUE(a.reply.ok()) << a.reply.status().ToString();
  ASSERT_EQ(a.reply->commands.size(), 1u);
  EXPECT_EQ(a.reply->commands[0].type, api::Command::Type::kLaunch);
  EXPECT_EQ(a.reply->commands[0].job_id, job);
  EXPECT_LT(a.took.count(), kIntervalMs);  // at the placement, not at the interval's end
  EXPECT_EQ(waiters_.held(), 0);
}

TEST_F(HeldHeartbeatTest, ANotificationBeforeTheWaitIsNotLost) {
  // The placement commits between the heartbeat's read and its wait: the generation read before
  // the read moved, so the wait ends at once. Simulated by a notification before the call with
  // the launch already there: the first read sees it, the heartbeat is not held at all.
  const int64_t job = PlacedJob(member_, n1_);
  waiters_.Notify(std::vector<int64_t>{n1_});
  auto a = HeldBeat(cred1_, n1_, 60'000).get();
  ASSERT_TRUE(a.reply.ok());
  ASSERT_EQ(a.reply->commands.size(), 1u);
  EXPECT_EQ(a.reply->commands[0].job_id, job);
  EXPECT_LT(a.took.count(), kIntervalMs / 2);
  // And a generation read before a notification makes the wait return at once.
  const uint64_t seen = waiters_.Generation(n2_);
  waiters_.Notify(std::vector<int64_t>{n2_});
  const auto t0 = SteadyClock::now();
  EXPECT_TRUE(waiters_.Wait(n2_, seen, milliseconds(5'000)));
  EXPECT_LT(SteadyClock::now() - t0, milliseconds(100));
}

TEST_F(HeldHeartbeatTest, NothingHappensAndItIsAnsweredAfterOneInterval) {
  // wait_ms beyond the interval is cut to the interval: the node is not seen DOWN for a wait.
  Answer a = HeldBeat(cred1_, n1_, 60'000).get();
  ASSERT_TRUE(a.reply.ok());
  EXPECT_TRUE(a.reply->commands.empty());
  EXPECT_GE(a.took.count(), kIntervalMs - 20);
  EXPECT_LT(a.took.count(), kIntervalMs + 1'000);
  // A shorter wait of its own is kept.
  Answer b = HeldBeat(cred1_, n1_, 100).get();
  ASSERT_TRUE(b.reply.ok());
  EXPECT_GE(b.took.count(), 90);
  EXPECT_LT(b.took.count(), kIntervalMs);
}

TEST_F(HeldHeartbeatTest, AWakeForAnotherNodeDoesNotEndTheWait) {
  auto held = HeldBeat(cred1_, n1_, 60'000);
  ASSERT_TRUE(WaitHeld(1));
  PlacedJob(member_, n2_);
  waiters_.NotifyAll();  // a cycle that preempted: every node reads again
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(waiters_.held(), 1);  // read again, nothing for n1, waiting on
  Answer a = held.get();
  ASSERT_TRUE(a.reply.ok());
  EXPECT_TRUE(a.reply->commands.empty());
  EXPECT_GE(a.took.count(), kIntervalMs - 20);
}

TEST_F(HeldHeartbeatTest, NoMoreThanTheLimitAreHeldTheRestAreAnsweredAtOnce) {
  auto first = HeldBeat(cred1_, n1_, 60'000);
  auto second = HeldBeat(cred2_, n2_, 60'000);
  ASSERT_TRUE(WaitHeld(2));
  // The limit (2 here; a quarter of the HTTP workers in the server) is reached: the third is
  // answered as if it had not asked, so heartbeats never take every worker thread.
  Answer third = HeldBeat(cred1_, n1_, 60'000).get();
  ASSERT_TRUE(third.reply.ok());
  EXPECT_LT(third.took.count(), kIntervalMs / 2);
  EXPECT_EQ(waiters_.held(), 2);
  EXPECT_TRUE(first.get().reply.ok());
  EXPECT_TRUE(second.get().reply.ok());
  EXPECT_EQ(waiters_.held(), 0);
}

TEST_F(HeldHeartbeatTest, AHeartbeatThatReportsSomethingIsNeverHeld) {
  // An agent gives up a held call when a job ends and sends its report again in the next one;
  // only reports safe to repeat may wait. A finished job (even an unknown one) is one of them.
  api::HeartbeatRequest req;
  req.has_launched = true;
  req.wait_ms = 60'000;
  req.finished.push_back({12345, 0, "", false});
  const auto t0 = SteadyClock::now();
  auto r = nodes_->Heartbeat(cred1_, n1_, req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(SteadyClock::now() - t0, milliseconds(kIntervalMs / 2));
  // Nor one that does not ask to wait.
  req.finished.clear();
  req.wait_ms = 0;
  const auto t1 = SteadyClock::now();
  ASSERT_TRUE(nodes_->Heartbeat(cred1_, n1_, req).ok());
  EXPECT_LT(SteadyClock::now() - t1, milliseconds(kIntervalMs / 2));
}

// A heartbeat reporting an end (the agent never gives it up) that asks to wait is answered
// once the scheduling pass its freed slot woke is over: with the launch that pass placed there,
// or as it was when the pass placed nothing there, or after NodeService::kPassWaitMs at most.
class EndReportTest : public HeldHeartbeatTest {
 protected:
  // The scheduler's side: every end report wakes pass kPass.
  NodeServiceHooks Hooks() override {
    NodeServiceHooks hooks = HeldHeartbeatTest::Hooks();
    hooks.wake_for_pass = [this] {
      ++wakes_;
      return kPass;
    };
    return hooks;
  }
  std::future<Answer> EndReport(const Principal& cred, int64_t node) {
    return std::async(std::launch::async, [this, cred, node] {
      api::HeartbeatRequest req;
      req.has_launched = true;
      req.wait_ms = 60'000;
      req.finished.push_back({12345, 0, "", false});
      const auto t0 = SteadyClock::now();
      auto r = nodes_->Heartbeat(cred, node, req);
      return Answer{std::move(r),
                    std::chrono::duration_cast<milliseconds>(SteadyClock::now() - t0)};
    });
  }
  static constexpr uint64_t kPass = 7;
  std::atomic<int> wakes_{0};
};

TEST_F(EndReportTest, ItCarriesTheLaunchItsPassPlacedOntoTheFreedSlot) {
  auto report = EndReport(cred1_, n1_);
  ASSERT_TRUE(WaitHeld(1));
  EXPECT_EQ(wakes_.load(), 1);
  const int64_t job = PlacedJob(member_, n1_);
  waiters_.Notify(std::vector<int64_t>{n1_});  // what the pass does, then says it is over
  waiters_.PassDone(kPass);
  ASSERT_EQ(report.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Answer a = report.get();
  ASSERT_TRUE(a.reply.ok()) << a.reply.status().ToString();
  ASSERT_EQ(a.reply->commands.size(), 1u);
  EXPECT_EQ(a.reply->commands[0].type, api::Command::Type::kLaunch);
  EXPECT_EQ(a.reply->commands[0].job_id, job);
  EXPECT_EQ(waiters_.held(), 0);
}

TEST_F(EndReportTest, ItIsAnsweredWhenItsPassIsOverWithNothingForTheNode) {
  auto report = EndReport(cred1_, n1_);
  ASSERT_TRUE(WaitHeld(1));
  // An earlier cycle (under way when the end was stored) ending is not its pass.
  waiters_.PassDone(kPass - 1);
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(waiters_.held(), 1);
  // Its pass placed a job on the other node only.
  PlacedJob(member_, n2_);
  waiters_.Notify(std::vector<int64_t>{n2_});
  const auto t0 = SteadyClock::now();
  waiters_.PassDone(kPass);
  ASSERT_EQ(report.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_LT(SteadyClock::now() - t0, milliseconds(100));
  Answer a = report.get();
  ASSERT_TRUE(a.reply.ok());
  EXPECT_TRUE(a.reply->commands.empty());
}

TEST_F(EndReportTest, ItWaitsNoLongerThanThePassWaitWhenNoPassEnds) {
  Answer a = EndReport(cred1_, n1_).get();
  ASSERT_TRUE(a.reply.ok());
  EXPECT_GE(a.took.count(), NodeService::kPassWaitMs - 20);
  EXPECT_LT(a.took.count(), kIntervalMs);
  // Without a wait asked for, at once, as before.
  api::HeartbeatRequest req;
  req.has_launched = true;
  req.finished.push_back({12346, 0, "", false});
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(nodes_->Heartbeat(cred1_, n1_, req).ok());
  EXPECT_LT(SteadyClock::now() - t0, milliseconds(kIntervalMs / 2));
}

TEST_F(HeldHeartbeatTest, StoppingTheServerAnswersEveryHeldHeartbeat) {
  auto held = HeldBeat(cred1_, n1_, 60'000);
  ASSERT_TRUE(WaitHeld(1));
  waiters_.Shutdown();
  ASSERT_EQ(held.wait_for(milliseconds(kIntervalMs / 2)), std::future_status::ready);
  EXPECT_TRUE(held.get().reply.ok());
  // And none is held from then on.
  Answer after = HeldBeat(cred1_, n1_, 60'000).get();
  EXPECT_LT(after.took.count(), kIntervalMs / 2);
}

}  // namespace
}  // namespace controlplane::service
