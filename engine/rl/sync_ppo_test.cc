#include "engine/rl/sync_ppo.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/report/recording_sink.h"
#include "engine/testing/small_reach.h"

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

}  // namespace
}  // namespace engine::rl
