// Preemption end to end: a high-priority 2-node job preempts a running low-priority engine job on
// a 2-node cluster; the victim gets SIGTERM, checkpoints the step in flight, goes back to PENDING,
// resumes from that checkpoint once the nodes are free and finishes at the same final step as an
// undisturbed run, with the parameters of one (same final loss).
#include <chrono>
#include <cstdio>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

json TrainSpec(const std::string& name, int priority, int nodes, int steps) {
  json spec = json::parse(R"({
    "kind": "train",
    "resources": {"ranks_per_node": 1},
    "engine": {"model": {"d_model": 32, "layers": 1, "heads": 2, "mlp": 64},
               "data": {"rows_per_step": 1},
               "checkpoint": {"every_steps": 1000, "keep": 2}, "seed": 3}})");
  spec["name"] = name;
  spec["priority"] = priority;
  spec["resources"]["nodes"] = nodes;
  spec["engine"]["optim"] = {{"steps", steps}, {"warmup_steps", 5}};
  return spec;
}

// The loss the job reported at its last step.
double FinalLoss(LocalStack& stack, int64_t id) {
  json last = stack.Get("/v1/jobs/" + std::to_string(id)).body["last_step"];
  return last.is_object() ? last.value("loss", -1.0) : -1.0;
}

void PreemptionScenario() {
  LocalStack stack(2, 1);
  stack.AddServerFlags({"--preempt-min-priority", "90", "--preempt-grace-ms", "20000"});
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();
  // Long enough that the victim is still training when its kill arrives (a few hundred ms after
  // the decision); a shorter run can finish first and is then merely requeued.
  constexpr int kSteps = 3000;

  // The reference: the same job, undisturbed.
  HttpResult ref = stack.Post("/v1/jobs", TrainSpec("reference", 10, 1, kSteps).dump());
  ASSERT_EQ(ref.status, 201) << ref.text;
  const int64_t ref_id = ref.body["id"];
  ASSERT_EQ(stack.WaitForState(ref_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240)["state"],
            "SUCCEEDED");

  HttpResult low = stack.Post("/v1/jobs", TrainSpec("low", 10, 1, kSteps).dump());
  ASSERT_EQ(low.status, 201) << low.text;
  const int64_t low_id = low.body["id"];
  const std::string low_path = "/v1/jobs/" + std::to_string(low_id);
  // Let it train a while, without a periodic checkpoint to fall back on.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  json job;
  while (std::chrono::steady_clock::now() < deadline) {
    job = stack.Get(low_path).body;
    if (job["last_step"].is_object() && job["last_step"].value("step", 0) >= 40) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);
  ASSERT_TRUE(job["latest_checkpoint"].is_null()) << "a checkpoint before the preemption";

  // Two nodes at priority 95: only by preempting the low job.
  HttpResult high = stack.Post("/v1/jobs", TrainSpec("high", 95, 2, 30).dump());
  ASSERT_EQ(high.status, 201) << high.text;
  const int64_t high_id = high.body["id"];
  json done_high = stack.WaitForState(high_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 240);
  EXPECT_EQ(done_high["state"], "SUCCEEDED") << done_high.dump(2);

  json done_low = stack.WaitForState(low_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 300);
  ASSERT_EQ(done_low["state"], "SUCCEEDED") << done_low.dump(2);
  EXPECT_EQ(done_low["last_step"]["step"], kSteps);

  // The story: preempted while RUNNING, back to PENDING, placed again, finished.
  json events = stack.Get(low_path + "/events?type=state&limit=100").body["events"];
  std::vector<std::string> to;
  std::string preempt_reason;
  for (const auto& e : events) {
    to.push_back(e["data"]["to"]);
    if (e["data"]["to"] == "RESTARTING") preempt_reason = e["data"]["reason"];
  }
  EXPECT_NE(std::find(to.begin(), to.end(), "RESTARTING"), to.end()) << events.dump();
  EXPECT_NE(preempt_reason.find(std::to_string(high_id)), std::string::npos) << preempt_reason;
  EXPECT_EQ(std::count(to.begin(), to.end(), "RUNNING"), 2) << events.dump();

  // The checkpoint written on SIGTERM is what the second attempt resumed from.
  json ckpts = stack.Get(low_path + "/events?type=checkpoint&limit=100").body["events"];
  ASSERT_GE(ckpts.size(), 2u) << ckpts.dump();  // the preemption's, then the final one
  const int64_t stopped_at = ckpts[0]["data"]["step"];
  EXPECT_GT(stopped_at, 40);
  EXPECT_LT(stopped_at, kSteps);
  // Both attempts' launcher lines are in the job's log, the second after the first.
  const std::string launcher = stack.Get(low_path + "/logs?rank=-1").text;
  EXPECT_NE(launcher.find("resuming from"), std::string::npos) << launcher;
  const std::string rank0 = stack.Get(low_path + "/logs?rank=0").text;
  EXPECT_NE(rank0.find("stopped on SIGTERM"), std::string::npos) << rank0.substr(0, 2000);
  EXPECT_LT(rank0.find("stopped on SIGTERM"), rank0.rfind("done:")) << rank0.substr(0, 2000);
  int64_t requeued = -1;
  for (const auto& e : events) {
    if (e["data"]["to"] == "PENDING" && e["data"]["from"] == "RESTARTING") requeued = e["id"];
  }
  ASSERT_GT(requeued, 0) << events.dump();
  json after = stack.Get(low_path + "/events?type=step&limit=1&after=" + std::to_string(requeued))
                   .body["events"];
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0]["data"]["step"], stopped_at + 1) << "the second attempt did not resume";

  // Same run as the undisturbed one: the same final loss (the engine resumes bitwise).
  EXPECT_NEAR(FinalLoss(stack, low_id), FinalLoss(stack, ref_id), 1e-9);
}

TEST(PreemptionTest, PreemptedJobCheckpointsRequeuesResumesAndFinishesTheSameRun) {
  PreemptionScenario();
}

}  // namespace
}  // namespace embody_test
