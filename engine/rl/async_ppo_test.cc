#include "engine/rl/async_ppo.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "api/job_event_check.h"
#include "engine/report/recording_sink.h"
#include "engine/testing/small_reach.h"

namespace engine::rl {
namespace {

using testing::MeanSuccess;
using testing::SmallReach;

constexpr int64_t kPerUpdate = 16 * 32;  // SmallReach: 16 environments × 32 steps

// The best success over 5 consecutive updates.
double BestWindow(const std::vector<UpdateRecord>& u) {
  double best = 0;
  for (size_t i = 0; i + 5 <= u.size(); ++i) best = std::max(best, MeanSuccess(u, i, i + 5));
  return best;
}

// A heavy-tailed step time: 1 ms on average in the body, one step in ten stalls ≥ 4 ms.
api::RlLatencyOptions Latency() {
  api::RlLatencyOptions l;
  l.mean_ms = 1.0;
  l.jitter = 0.5;
  l.tail_probability = 0.1;
  l.tail_scale = 4.0;
  return l;
}

SyncPpoOptions Levels(int64_t updates, bool disaggregated, bool env_async, bool streaming,
                      int eta = 1) {
  SyncPpoOptions o = SmallReach(kPerUpdate * updates);
  o.engine.rl.disaggregated = disaggregated;
  o.engine.rl.max_staleness = eta;
  o.engine.rl.env_async = env_async;
  o.engine.rl.streaming = streaming;
  o.engine.rl.micro_batches = 4;
  return o;
}

// Every update's staleness histogram covers its batch and stays within η; returns the largest.
int64_t CheckStaleness(const SyncPpoResult& r, int eta) {
  int64_t worst = 0;
  for (const UpdateRecord& u : r.updates) {
    EXPECT_LE(u.max_staleness, eta);
    EXPECT_EQ(static_cast<int>(u.staleness.size()), eta + 1);
    int64_t steps = 0;
    for (int64_t c : u.staleness) steps += c;
    EXPECT_EQ(steps, kPerUpdate);
    worst = std::max(worst, u.max_staleness);
  }
  return worst;
}

TEST(AsyncPpoTest, LevelsAreOffByDefaultAndLatencyAloneChangesOnlyTime) {
  EXPECT_FALSE(api::RlOptions{}.any_async());
  LocalCommunicator comm;
  auto plain = RunSyncPpo(SmallReach(kPerUpdate * 3), comm, nullptr);
  SyncPpoOptions slow = SmallReach(kPerUpdate * 3);
  slow.engine.rl.env_latency = Latency();
  slow.engine.rl.env_latency.mean_ms = 0.2;
  auto waited = RunSyncPpo(slow, comm, nullptr);
  ASSERT_TRUE(plain.ok() && waited.ok());
  ASSERT_EQ(plain->updates.size(), waited->updates.size());
  for (size_t i = 0; i < plain->updates.size(); ++i) {
    EXPECT_EQ(plain->updates[i].ppo.policy_loss, waited->updates[i].ppo.policy_loss);
    EXPECT_EQ(plain->updates[i].success_rate, waited->updates[i].success_rate);
  }
  EXPECT_EQ(plain->final_heads, waited->final_heads);  // that it waits: latency_env_test
}

TEST(AsyncPpoTest, PerEnvironmentActingAloneLearnsOnPolicyInFullBatches) {
  LocalCommunicator comm;
  SyncPpoOptions o = Levels(60, false, true, false);
  o.engine.rl.max_wait_ms = 1000;  // only max_batch (all 16) fires
  RecordingSink sink;
  auto r = RunAsyncPpo(o, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->updates.size(), 60u);
  EXPECT_EQ(CheckStaleness(*r, 0), 0);  // level 1 off: acting waits for every update
  for (const UpdateRecord& u : r->updates) EXPECT_EQ(u.inference_batch, 16.0);
  // Threads decide the order of rows in a batched inference, which can change the last bits of
  // its outputs; the run is therefore not bitwise repeatable, and is held to a learning window.
  const double first = MeanSuccess(r->updates, 0, 5), best = BestWindow(r->updates);
  std::printf("level 2: success first 5 updates %.3f, best 5 %.3f, last 5 %.3f\n", first, best,
              MeanSuccess(r->updates, 55, 60));
  EXPECT_GT(best, first + 0.4);
  const std::vector<nlohmann::json> events = sink.events();
  ASSERT_EQ(events.size(), 60u);
  for (const char* key : {"trajectories_per_s", "staleness", "staleness_mean", "staleness_max",
                          "queue_depth", "actor_idle_share", "learner_idle_share",
                          "inference_batch", "importance_capped", "env_steps_per_s",
                          "success_rate"}) {
    EXPECT_TRUE(events.back().contains(key)) << key;
  }
  EXPECT_EQ(api::CheckJobEvent("step", events.back()), std::nullopt) << events.back().dump();
}

TEST(AsyncPpoTest, MaxBatchOneInfersEveryRequestAlone) {
  LocalCommunicator comm;
  SyncPpoOptions o = Levels(2, false, true, false);
  o.engine.rl.max_batch = 1;
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const UpdateRecord& u : r->updates) EXPECT_EQ(u.inference_batch, 1.0);
}

TEST(AsyncPpoTest, MaxWaitServesFewerThanMaxBatch) {
  // Environments out of step (latency, and acting ahead of the learner) rarely all wait at
  // once: without the max_wait deadline this run would never finish.
  LocalCommunicator comm;
  SyncPpoOptions o = Levels(6, true, true, false);
  o.engine.rl.env_latency = Latency();
  o.engine.rl.max_wait_ms = 0.5;
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  double mean = 0;
  for (const UpdateRecord& u : r->updates) mean += u.inference_batch / r->updates.size();
  EXPECT_GT(mean, 0.0);
  EXPECT_LT(mean, 16.0);
}

TEST(AsyncPpoTest, StalenessNeverExceedsEta) {
  LocalCommunicator comm;
  for (bool env_async : {false, true}) {
    for (int eta : {1, 2}) {
      SyncPpoOptions o = Levels(10, true, env_async, false, eta);
      o.engine.rl.env_latency = Latency();
      auto r = RunAsyncPpo(o, comm, nullptr);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const int64_t worst = CheckStaleness(*r, eta);
      std::printf("env_async %d, eta %d: largest staleness %lld\n", env_async, eta,
                  static_cast<long long>(worst));
      // Acting goes on while the learner updates, so some steps are learned stale.
      EXPECT_GE(worst, 1);
    }
  }
}

TEST(AsyncPpoTest, DisaggregatedLearnsOnReach) {
  // Without latency the actors keep a whole batch ahead: nearly every step is learned one
  // version stale, and decoupled PPO still learns (more slowly than on-policy: docs/rl.md).
  LocalCommunicator comm;
  RecordingSink sink;
  auto r = RunAsyncPpo(Levels(60, true, false, false, 1), comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const double first = MeanSuccess(r->updates, 0, 5), best = BestWindow(r->updates);
  double stale = 0;
  for (const UpdateRecord& u : r->updates) stale += u.mean_staleness / r->updates.size();
  // Each step event reports the update's share of capped importance weights as the learner
  // computed it.
  const std::vector<nlohmann::json> events = sink.events();
  ASSERT_EQ(events.size(), r->updates.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].at("importance_capped").get<double>(), r->updates[i].ppo.importance_capped);
  }
  std::printf("level 1: success first 5 updates %.3f, best 5 %.3f, last 5 %.3f, staleness %.2f\n",
              first, best, MeanSuccess(r->updates, 55, 60), stale);
  EXPECT_GT(stale, 0.5);
  EXPECT_GT(best, first + 0.3);
}

TEST(AsyncPpoTest, StreamingTakesAsManyStepsAndLearnsOnReach) {
  LocalCommunicator comm;
  auto r = RunAsyncPpo(Levels(60, true, false, true, 1), comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // 4 global batches streamed (one optimiser step each), then 3 more epochs of 4 minibatches.
  for (const UpdateRecord& u : r->updates) EXPECT_EQ(u.ppo.minibatches, 16);
  const double first = MeanSuccess(r->updates, 0, 5), best = BestWindow(r->updates);
  std::printf("levels 1+3: success first 5 updates %.3f, best 5 %.3f, last 5 %.3f\n", first, best,
              MeanSuccess(r->updates, 55, 60));
  EXPECT_GT(best, first + 0.3);
}

TEST(AsyncPpoTest, StaleDataIsLearnedAtTheScaledRate) {
  EXPECT_DOUBLE_EQ(StaleLearningRate(1e-3, 0.25, 0.0), 1e-3);
  EXPECT_DOUBLE_EQ(StaleLearningRate(1e-3, 0.25, 1.0), 2.5e-4);
  EXPECT_DOUBLE_EQ(StaleLearningRate(1e-3, 0.25, 0.5), 5e-4);
  EXPECT_DOUBLE_EQ(StaleLearningRate(1e-3, 0.25, 2.0), 6.25e-5);
  // Every update's rate follows its batch's staleness (with streaming, the later epochs' rate,
  // which is the whole rollout's), and some updates are stale.
  LocalCommunicator comm;
  for (bool streaming : {false, true}) {
    SyncPpoOptions o = Levels(8, true, true, streaming);
    o.engine.rl.env_latency = Latency();
    RecordingSink sink;
    auto r = RunAsyncPpo(o, comm, &sink);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    double stale = 0;
    for (const nlohmann::json& ev : sink.events()) {
      const double s = ev["staleness_mean"].get<double>();
      EXPECT_NEAR(ev["lr"].get<double>(), StaleLearningRate(5e-4, 0.25, s), 1e-12) << ev.dump();
      stale = std::max(stale, s);
    }
    EXPECT_GT(stale, 0.0);
  }
  // Without level 1 nothing is stale and the rate is lr.
  RecordingSink sink;
  auto r = RunAsyncPpo(Levels(2, false, true, false), comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const nlohmann::json& ev : sink.events()) EXPECT_EQ(ev["lr"].get<double>(), 5e-4);
}

TEST(AsyncPpoTest, StopRequestEndsTheRunAndItsThreads) {
  LocalCommunicator comm;
  std::atomic<bool> stop{true};
  SyncPpoOptions o = Levels(50, true, true, false);
  o.stop_requested = &stop;
  auto r = RunAsyncPpo(o, comm, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stopped);
  EXPECT_TRUE(r->updates.empty());
}

}  // namespace
}  // namespace engine::rl
