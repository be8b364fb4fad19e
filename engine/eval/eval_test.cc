// Closed-loop evaluation: behaviour cloning on expert demonstrations against the untrained
// policy, determinism per seed, and the three checkpoint kinds it loads (bc, FP8, rl).
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "engine/format/checkpoint.h"
#include "engine/format/checkpoint_model.h"
#include "engine/eval/episodes.h"
#include "engine/eval/eval_policy.h"
#include "engine/jobs/eval.h"
#include "engine/eval/periodic_eval.h"
#include "engine/model/policy_options.h"
#include "engine/report/recording_sink.h"
#include "engine/policy/rl_checkpoint.h"
#include "engine/testing/small_run.h"
#include "engine/dist/communicator.h"

namespace engine::eval {
namespace {

// A training checkpoint's bytes for `params` of the SmallRun model (what the trainer writes).
std::string BcCheckpointBytes(const TrainerOptions& o, const std::vector<float>& params) {
  api::JobSpec spec;
  spec.engine = o.engine;
  PolicyConfig config = PolicyConfigFromOptions(o.engine).value();
  CheckpointData d;
  d.step = o.engine.optim.steps;
  d.config = {{"engine", api::ToJson(spec)["engine"]},
              {"model", ModelJson(config, params.size())},
              {"world_size", 1}};
  d.params = params;
  d.adam_m.assign(params.size(), 0.0f);
  d.adam_v.assign(params.size(), 0.0f);
  return EncodeCheckpoint(d);
}

std::vector<float> UntrainedParams(const TrainerOptions& o) {
  auto model = PolicyTransformer::Create(PolicyConfigFromOptions(o.engine).value()).value();
  model->Init(o.engine.seed);
  return std::vector<float>(model->params(), model->params() + model->num_params());
}

TaskEvalResult Evaluate(const std::string& bytes, bool fp8, const std::string& task,
                        int episodes, uint64_t seed) {
  auto p = LoadEvalPolicy(bytes, fp8);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  auto r = EvaluateTask(*p->actor, EnvFor(*p, task), episodes, seed);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

TEST(EvalTest, BehaviourCloningBeatsTheUntrainedPolicyOnReach) {
  // 600 steps of the tests' tiny run (~15 s here): the cloned policy reaches about half of the
  // goals, the untrained one none (docs/eval.md, "Measured").
  TrainerOptions o = testing::SmallRun(600, 3);
  LocalCommunicator comm;
  auto trained = Train(o, comm, nullptr);
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();
  const std::string bc = BcCheckpointBytes(o, trained->params);
  const std::string untrained = BcCheckpointBytes(o, UntrainedParams(o));
  const TaskEvalResult a = Evaluate(bc, false, "reach", 64, 9);
  const TaskEvalResult b = Evaluate(untrained, false, "reach", 64, 9);
  std::printf("reach, 64 episodes: bc success %.3f return %.3f; untrained %.3f return %.3f\n",
              a.success_rate, a.mean_return, b.success_rate, b.mean_return);
  EXPECT_GE(a.success_rate, b.success_rate + 0.25);
  EXPECT_GT(a.mean_return, b.mean_return);

  // FP8 (post-training quantisation, then the FP8 checkpoint's bytes) stays close to fp32.
  const TaskEvalResult q = Evaluate(bc, true, "reach", 64, 9);
  std::printf("reach, 64 episodes: bc fp8 success %.3f\n", q.success_rate);
  EXPECT_GE(q.success_rate, a.success_rate - 0.15);

  // Deterministic per seed; another seed draws other episodes.
  const TaskEvalResult again = Evaluate(bc, false, "reach", 64, 9);
  EXPECT_EQ(again.successes, a.successes);
  EXPECT_EQ(again.mean_return, a.mean_return);
  const TaskEvalResult other = Evaluate(bc, false, "reach", 64, 10);
  EXPECT_NE(other.mean_return, a.mean_return);
}

TEST(EvalTest, RlPolicyCheckpointsLoadAsTheirGaussianMean) {
  api::EngineOptions e = testing::SmallRun(1).engine;
  e.rl.task = "push";
  e.model.action_dim = 4;
  e.rl.cameras = 0;
  e.rl.episode_steps = 20;
  auto policy =
      ActorCritic::Create(PolicyConfigFromOptions(e).value(), 4, -0.5f).value();
  for (size_t i = 0; i < policy->heads().size(); ++i) policy->heads()[i] += 0.01f * (i % 7);
  const std::string bytes = EncodeCheckpoint(RlPolicyCheckpoint(*policy, e, 12, 2));
  auto p = LoadEvalPolicy(bytes, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kind, "rl");
  EXPECT_EQ(p->step, 12);
  EXPECT_EQ(p->rl->heads(), policy->heads());
  const sim::EnvSpec env = EnvFor(*p, "push");
  EXPECT_EQ(env.cameras, 0);
  EXPECT_EQ(env.episode_steps, 20);
  EXPECT_TRUE(env.privileged_state);
  auto made = sim::MakeVecEnv(env);
  ASSERT_TRUE(made.ok());
  std::vector<float> got;
  ASSERT_TRUE(p->actor->Act((*made)->observations(), 0, &got).ok());
  ASSERT_TRUE(policy->Forward((*made)->observations()).ok());
  ASSERT_EQ(got.size(), static_cast<size_t>(env.num_envs * 4));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], policy->mean()[i]);
  auto r = EvaluateTask(*p->actor, env, 5, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->episodes, 5);
  // An rl policy has no FP8 path; a BC trunk loader refuses the rl checkpoint.
  EXPECT_FALSE(LoadEvalPolicy(bytes, true).ok());
  auto ck = DecodeCheckpoint(bytes).value();
  EXPECT_FALSE(policy->LoadTrunk(ck).ok());
}

TEST(EvalTest, BehaviourCloningBeatsTheUntrainedPolicyOnPush) {
  // The same tiny run on sim:push (action_dim 4): the reactive expert's perturbed
  // demonstrations and the object state in the state token let a one-frame policy push the
  // block onto the goal in most episodes; the untrained policy in none (docs/benchmarks.md,
  // "Closed loop").
  TrainerOptions o = testing::SmallRun(600, 3);
  o.engine.data.dataset = "sim:push";
  o.engine.model.action_dim = 4;
  LocalCommunicator comm;
  auto trained = Train(o, comm, nullptr);
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();
  const TaskEvalResult a = Evaluate(BcCheckpointBytes(o, trained->params), false, "push", 64, 9);
  const TaskEvalResult b = Evaluate(BcCheckpointBytes(o, UntrainedParams(o)), false, "push", 64, 9);
  std::printf("push, 64 episodes: bc success %.3f return %.3f; untrained %.3f return %.3f\n",
              a.success_rate, a.mean_return, b.success_rate, b.mean_return);
  EXPECT_GE(a.success_rate, b.success_rate + 0.3);
  EXPECT_GT(a.mean_return, b.mean_return);
}

TEST(EvalTest, BadInputIsRefused) {
  EXPECT_FALSE(LoadEvalPolicy("not a checkpoint", false).ok());
  TrainerOptions o = testing::SmallRun(20);
  const std::string bytes = BcCheckpointBytes(o, UntrainedParams(o));
  auto p = LoadEvalPolicy(bytes, false);
  ASSERT_TRUE(p.ok());
  sim::EnvSpec env = EnvFor(*p, "reach");
  EXPECT_FALSE(EvaluateTask(*p->actor, env, 0, 1).ok());
  EXPECT_FALSE(EvaluateTask(*p->actor, env, kMaxEvalEpisodes + 1, 1).ok());
  env.action_dim = 3;  // not the policy's
  EXPECT_FALSE(EvaluateTask(*p->actor, env, 4, 1).ok());
  // A spec's task the policy cannot act in: action_dim 7 works for every task, 5 for reach only.
  api::JobSpec spec;
  spec.kind = api::JobKind::kEval;
  spec.eval.tasks = {"reach", "push"};
  spec.eval.episodes = 3;
  EXPECT_FALSE(RunEvalJob(spec, "", nullptr).ok());                   // nothing to load
  EXPECT_FALSE(RunEvalJob(spec, "/nonexistent/step-1.ckpt", nullptr).ok());
}

TEST(EvalTest, TrainingEvaluatesEveryKStepsIntoItsStepEvents) {
  TrainerOptions o = testing::SmallRun(6);
  o.engine.eval_every = 3;
  o.engine.eval_episodes = 4;
  LocalCommunicator comm;
  RecordingSink sink;
  auto r = Train(o, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int evaluated = 0;
  for (const auto& ev : sink.events()) {
    if (ev.value("type", "") != "step") continue;
    const bool due = ev["step"].get<int>() % 3 == 0;
    EXPECT_EQ(ev.contains("eval_success_rate"), due) << ev.dump();
    if (!due) continue;
    ++evaluated;
    const double rate = ev["eval_success_rate"];
    EXPECT_GE(rate, 0.0);
    EXPECT_LE(rate, 1.0);
    EXPECT_EQ(ev["eval_episodes"], 4);
    EXPECT_TRUE(ev["eval_mean_return"].is_number());
  }
  EXPECT_EQ(evaluated, 2);
  // A dataset that names no task cannot be evaluated during training.
  api::EngineOptions e = o.engine;
  e.data.dataset = "dir:/data/x";
  EXPECT_FALSE(PeriodicEval::ForTraining(e).ok());
}

}  // namespace
}  // namespace engine::eval
