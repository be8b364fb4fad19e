#include "engine/rl/sync_ppo.h"

#include <atomic>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/report/recording_sink.h"
#include "engine/testing/small_reach.h"
#include "engine/testing/stop_at_step.h"

namespace engine::rl {
namespace {

using testing::MeanSuccess;
using testing::SmallReach;

TEST(SyncPpoTest, RaisesSuccessOnReach) {
  LocalCommunicator comm;
  RecordingSink sink;
  auto r = RunSyncPpo(SmallReach(16 * 32 * 60), comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& u = r->updates;
  ASSERT_EQ(u.size(), 60u);
  const double first = MeanSuccess(u, 0, 5), last = MeanSuccess(u, u.size() - 5, u.size());
  std::printf("success rate: first 5 updates %.3f, last 5 %.3f\n", first, last);
  for (size_t i = 0; i < u.size(); i += 5) {
    std::printf("update %zu: success %.3f return %.3f kl %.4f clip %.3f entropy %.3f vloss %.4f\n",
                i, u[i].success_rate, u[i].mean_return, u[i].ppo.approx_kl, u[i].ppo.clip_fraction,
                u[i].ppo.entropy, u[i].ppo.value_loss);
  }
  EXPECT_GT(last, first + 0.3);
  EXPECT_GT(last, 0.5);
  // One step event per update, with the RL fields.
  const std::vector<nlohmann::json> events = sink.events();
  ASSERT_EQ(events.size(), u.size());
  const nlohmann::json& ev = events.back();
  for (const char* key : {"env_steps_per_s", "mean_return", "success_rate", "policy_loss",
                          "value_loss", "entropy", "approx_kl", "clip_fraction"}) {
    EXPECT_TRUE(ev.contains(key)) << key;
  }
  EXPECT_EQ(ev["step"], 60);
}

TEST(SyncPpoTest, SameSeedSameRun) {
  LocalCommunicator comm;
  auto a = RunSyncPpo(SmallReach(16 * 32 * 3), comm, nullptr);
  auto b = RunSyncPpo(SmallReach(16 * 32 * 3), comm, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->updates.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a->updates[i].ppo.policy_loss, b->updates[i].ppo.policy_loss);
    EXPECT_EQ(a->updates[i].ppo.value_loss, b->updates[i].ppo.value_loss);
  }
  EXPECT_EQ(a->final_heads, b->final_heads);
  SyncPpoOptions other = SmallReach(16 * 32 * 3);
  other.engine.seed = 2;
  auto c = RunSyncPpo(other, comm, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->final_heads, c->final_heads);
}

TEST(SyncPpoTest, AMissingInitCheckpointIsAnError) {
  LocalCommunicator comm;
  SyncPpoOptions o = SmallReach(512);
  o.init_from = "/nonexistent/step-1.ckpt";
  auto r = RunSyncPpo(o, comm, nullptr);
  EXPECT_FALSE(r.ok());
}

// A stop is decided with the update's episode count (as the ranks of a multi-rank run agree on
// it): a flag raised after update 2's count stops the run after update 3, which the stopped run
// computes exactly as the full run does; a flag up before the run stops it before any update.
TEST(SyncPpoTest, AStopEndsTheRunAfterTheNextUpdatesCount) {
  LocalCommunicator comm;
  auto full = RunSyncPpo(SmallReach(16 * 32 * 5), comm, nullptr);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_FALSE(full->stopped);
  std::atomic<bool> stop{false};
  SyncPpoOptions o = SmallReach(16 * 32 * 5);
  o.stop_requested = &stop;
  testing::StopAtStep sink(&stop, 2);
  auto stopped = RunSyncPpo(o, comm, &sink);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_TRUE(stopped->stopped);
  ASSERT_EQ(stopped->updates.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(stopped->updates[i].ppo.value_loss, full->updates[i].ppo.value_loss) << i;
    EXPECT_EQ(stopped->updates[i].episodes, full->updates[i].episodes) << i;
  }
  auto before = RunSyncPpo(o, comm, nullptr);  // the flag is still up
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_TRUE(before->stopped);
  EXPECT_TRUE(before->updates.empty());
}

}  // namespace
}  // namespace engine::rl
