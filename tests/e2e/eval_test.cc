// The closed loop through the public API: behaviour cloning on sim:reach (evaluating itself every
// 300 steps into its metric series), then an eval job on its checkpoint against an eval job on a
// practically untrained one: the cloned policy's success rate is clearly higher. Another tenant
// can neither evaluate those checkpoints nor read the results.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

// The engine tests' tiny run (engine/testing/small_run.h): ~15 s of one core for 600 steps.
json TrainSpec(const std::string& name, int steps, double lr) {
  json spec = json::parse(R"({
    "kind": "train",
    "resources": {"nodes": 1, "ranks_per_node": 1},
    "engine": {"model": {"d_model": 48, "layers": 2, "heads": 4, "mlp": 96,
                         "action_horizon": 4, "action_dim": 7},
               "data": {"dataset": "sim:reach", "rows_per_step": 2, "tokens_per_row": 512},
               "optim": {"warmup_steps": 0},
               "seed": 3}})");
  spec["name"] = name;
  spec["engine"]["optim"]["steps"] = steps;
  spec["engine"]["optim"]["warmup_steps"] = std::min(steps, 10);
  spec["engine"]["optim"]["lr"] = lr;
  return spec;
}

json EvalSpec(const std::string& name, const json& source) {
  json spec = {{"name", name},
               {"kind", "eval"},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
               {"eval", {{"tasks", {"reach"}}, {"episodes", 48}, {"seed", 9}}}};
  for (const auto& [k, v] : source.items()) spec["eval"][k] = v;
  return spec;
}

using Tenant = LocalStack::Tenant;

// Runs a job to its end as `token`; returns its id (0 on failure, reported).
int64_t RunToEnd(LocalStack& stack, const json& spec, const std::string& token) {
  HttpResult sub = stack.Post("/v1/jobs", spec.dump(), token);
  EXPECT_EQ(sub.status, 201) << sub.text;
  if (sub.status != 201) return 0;
  const int64_t id = sub.body["id"];
  json done = stack.WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 300);
  EXPECT_EQ(done.value("state", ""), "SUCCEEDED")
      << done.dump(2) << stack.Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=0").text;
  return id;
}

// The job's checkpoints once its agent has uploaded at least one (uploads trail the job's end).
json ReadyCheckpoints(LocalStack& stack, int64_t job, const std::string& token) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  json list;
  while (std::chrono::steady_clock::now() < deadline) {
    HttpResult c = stack.Get("/v1/jobs/" + std::to_string(job) + "/checkpoints", token);
    if (c.status == 200 && !c.body["checkpoints"].empty()) return c.body["checkpoints"];
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return json::array();
}

double SuccessRate(LocalStack& stack, int64_t eval_job, const std::string& token) {
  HttpResult r = stack.Get("/v1/jobs/" + std::to_string(eval_job) + "/evaluation", token);
  EXPECT_EQ(r.status, 200) << r.text;
  if (r.status != 200 || r.body["tasks"].size() != 1) {
    ADD_FAILURE() << "no result: " << r.text;
    return -1.0;
  }
  const json& t = r.body["tasks"][0];
  EXPECT_EQ(t["task"], "reach");
  EXPECT_EQ(t["episodes"], 48);
  return t["success_rate"].get<double>();
}

TEST(EvalE2eTest, BehaviourCloningThenEvaluationBeatsTheUntrainedPolicy) {
  LocalStack stack(1, 2);
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();
  const Tenant a = stack.AddTenant("eval-a"), b = stack.AddTenant("eval-b");
  ASSERT_FALSE(a.member.empty());
  ASSERT_FALSE(b.member.empty());

  json bc_spec = TrainSpec("reach-bc", 600, 4e-3);
  bc_spec["engine"]["eval_every"] = 300;
  bc_spec["engine"]["eval_episodes"] = 8;
  const int64_t bc = RunToEnd(stack, bc_spec, a.member);
  // One step at a learning rate of 1e-12: the initial policy, through the same path.
  const int64_t untrained = RunToEnd(stack, TrainSpec("reach-untrained", 1, 1e-12), a.member);
  ASSERT_GT(bc, 0);
  ASSERT_GT(untrained, 0);
  const json bc_ckpts = ReadyCheckpoints(stack, bc, a.member);
  ASSERT_FALSE(bc_ckpts.empty());
  ASSERT_FALSE(ReadyCheckpoints(stack, untrained, a.member).empty());

  // The training run's success-rate curve is a metric series.
  HttpResult m =
      stack.Get("/v1/jobs/" + std::to_string(bc) + "/metrics?names=eval_success_rate", a.member);
  ASSERT_EQ(m.status, 200) << m.text;
  ASSERT_EQ(m.body["series"]["eval_success_rate"].size(), 2u) << m.text;
  EXPECT_EQ(m.body["series"]["eval_success_rate"][1][0], 600);

  const int64_t eval_bc = RunToEnd(stack, EvalSpec("eval-bc", {{"checkpoint_from_job", bc}}),
                                   a.member);
  const int64_t eval_untrained = RunToEnd(
      stack, EvalSpec("eval-untrained", {{"checkpoint_from_job", untrained}}), a.member);
  ASSERT_GT(eval_bc, 0);
  ASSERT_GT(eval_untrained, 0);
  const double trained_rate = SuccessRate(stack, eval_bc, a.member);
  const double untrained_rate = SuccessRate(stack, eval_untrained, a.member);
  std::printf("reach, 48 episodes: behaviour-cloned %.3f, untrained %.3f\n", trained_rate,
              untrained_rate);
  EXPECT_GE(trained_rate, untrained_rate + 0.25);
  // The eval job evaluated the checkpoint the server resolved.
  HttpResult ev = stack.Get("/v1/jobs/" + std::to_string(eval_bc), a.member);
  EXPECT_EQ(ev.body["spec"]["init_from"], bc_ckpts.back()["id"]) << ev.text;

  // Tenant b: a's jobs and checkpoints do not exist for it, and nothing is stored.
  HttpResult by_job = stack.Post(
      "/v1/jobs", EvalSpec("steal", {{"checkpoint_from_job", bc}}).dump(), b.member);
  EXPECT_EQ(by_job.status, 404) << by_job.text;
  EXPECT_EQ(by_job.body["error"]["field"], "eval.checkpoint_from_job");
  HttpResult by_id = stack.Post(
      "/v1/jobs", EvalSpec("steal", {{"checkpoint", bc_ckpts.back()["id"]}}).dump(), b.member);
  EXPECT_EQ(by_id.status, 404) << by_id.text;
  EXPECT_EQ(by_id.body["error"]["field"], "eval.checkpoint");
  json sneaky = EvalSpec("steal", {{"checkpoint_from_job", eval_bc}});
  sneaky["init_from"] = bc_ckpts.back()["id"];
  EXPECT_EQ(stack.Post("/v1/jobs", sneaky.dump(), b.member).status, 400);
  EXPECT_EQ(
      stack.Get("/v1/jobs/" + std::to_string(eval_bc) + "/evaluation", b.member).status, 404);
  HttpResult b_jobs = stack.Get("/v1/jobs", b.member);
  EXPECT_TRUE(b_jobs.body["jobs"].empty()) << b_jobs.text;
}

}  // namespace
}  // namespace embody_test
