// The rl job's end of the closed loop: PPO writes its final policy as a checkpoint that
// evaluation loads (and that beats the untrained policy on the task it trained on), evaluates
// every K updates into its step events, and trains on the table-top tasks.
#include "engine/policy/rl_checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "engine/eval/episodes.h"
#include "engine/eval/eval_policy.h"
#include "engine/model/policy_options.h"
#include "engine/report/recording_sink.h"
#include "engine/rl/sync_ppo.h"
#include "engine/testing/small_reach.h"

namespace engine::rl {
namespace {

using testing::SmallReach;

class TempDir {
 public:
  TempDir() {
    std::string t = "/tmp/embody-rl-ckpt-XXXXXX";
    path_ = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RlPolicyCheckpointTest, PpoLeavesAPolicyThatEvaluationLoadsAndThatBeatsTheUntrainedOne) {
  TempDir dir;
  SyncPpoOptions o = SmallReach(16 * 32 * 60);
  o.checkpoint_dir = dir.path();
  o.engine.eval_every = 20;
  o.engine.eval_episodes = 16;
  LocalCommunicator comm;
  RecordingSink sink;
  auto r = RunSyncPpo(o, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->checkpoint, dir.path() + "/step-60.ckpt");

  int evaluated = 0, checkpoints = 0;
  for (const auto& ev : sink.events()) {
    if (ev["type"] == "checkpoint") {
      ++checkpoints;
      EXPECT_EQ(ev["path"], r->checkpoint);
      EXPECT_EQ(ev["step"], 60);
    }
    if (ev["type"] != "step") continue;
    const bool due = ev["step"].get<int>() % 20 == 0;
    EXPECT_EQ(ev.contains("eval_success_rate"), due) << ev.dump();
    evaluated += due;
  }
  EXPECT_EQ(evaluated, 3);
  EXPECT_EQ(checkpoints, 1);

  auto bytes = common::ReadFile(r->checkpoint);
  ASSERT_TRUE(bytes.ok());
  auto p = eval::LoadEvalPolicy(*bytes, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kind, "rl");
  EXPECT_EQ(p->step, 60);
  EXPECT_EQ(p->rl->heads(), r->final_heads);
  auto trained = eval::EvaluateTask(*p->actor, eval::EnvFor(*p, "reach"), 64, 5);
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();

  auto fresh = ActorCritic::Create(PolicyConfigFromOptions(o.engine).value(), o.engine.seed,
                                   static_cast<float>(o.engine.rl.init_log_std))
                   .value();
  eval::GaussianMeanActor untrained_actor(*fresh);
  auto untrained = eval::EvaluateTask(untrained_actor, eval::EnvFor(*p, "reach"), 64, 5);
  ASSERT_TRUE(untrained.ok());
  std::printf("reach (rl), 64 episodes: ppo %.3f, untrained %.3f\n", trained->success_rate,
              untrained->success_rate);
  EXPECT_GE(trained->success_rate, untrained->success_rate + 0.3);
}

TEST(RlPolicyCheckpointTest, PpoTrainsOnPushAndPickPlace) {
  for (const char* task : {"push", "pick_place"}) {
    SyncPpoOptions o = SmallReach(4 * 16 * 2);
    o.engine.model.action_dim = 4;
    o.engine.rl.task = task;
    o.engine.rl.envs = 4;
    o.engine.rl.rollout_steps = 16;
    o.engine.rl.episode_steps = 8;  // short episodes: some end inside the two rollouts
    LocalCommunicator comm;
    RecordingSink sink;
    auto r = RunSyncPpo(o, comm, &sink);
    ASSERT_TRUE(r.ok()) << task << ": " << r.status().ToString();
    ASSERT_EQ(r->updates.size(), 2u) << task;
    EXPECT_GT(r->updates[0].episodes, 0) << task;
    EXPECT_TRUE(std::isfinite(r->updates[1].ppo.policy_loss)) << task;
  }
  SyncPpoOptions bad = SmallReach(64);
  bad.engine.rl.task = "stack";
  LocalCommunicator comm;
  auto r = RunSyncPpo(bad, comm, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "engine.rl.task");
}

}  // namespace
}  // namespace engine::rl
