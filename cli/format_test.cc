#include "cli/format.h"

#include <gtest/gtest.h>

namespace cli {
namespace {

TEST(FormatTest, Table) {
  EXPECT_EQ(FormatTable({{"ID", "NAME"}, {"10", "x"}}), "ID  NAME\n10  x\n");
}

TEST(FormatTest, MetricsTable) {
  auto reply = nlohmann::json::parse(R"({"series": {
      "loss": [[1, 1700000000000, 0.5], [2, 1700000001000, 0.25]],
      "tokens_per_s": [[2, 1700000001000, 12345.5]]}})");
  EXPECT_EQ(MetricsTable(reply),
            "STEP  TIME      loss  tokens_per_s\n"
            "1     22:13:20  0.5   -\n"
            "2     22:13:21  0.25  12345.5\n");
  EXPECT_EQ(MetricsTable(nlohmann::json::object()), "STEP  TIME\n");
}

TEST(FormatTest, LaunchPhasesTable) {
  auto job = nlohmann::json::parse(R"({"id": 7, "launch_phases": {"attempt": 0, "node": "n1",
      "total_ms": 155, "phases": [{"phase": "queued", "ms": 40}, {"phase": "run", "ms": 100},
      {"phase": "transit", "ms": 15}]}})");
  EXPECT_EQ(LaunchPhasesTable(job),
            "launch of attempt 0 on n1: 155 ms from submission to exit stored\n"
            "PHASE    MS   WHAT\n"
            "queued   40   submitted -> placed by the scheduler\n"
            "run      100  node: -> exited\n"
            "transit  15   launch and report on the network, server's own work\n");
  job["launch_phases"]["total_ms"] = nullptr;
  EXPECT_EQ(LaunchPhasesTable(job).substr(0, 36), "launch of attempt 0 on n1: not ended");
  EXPECT_EQ(LaunchPhasesTable(nlohmann::json::parse(R"({"id": 7})")), "");
}

TEST(FormatTest, EvaluationTable) {
  // Read through the view's codec, as `embody eval` reads the server's reply.
  auto reply = api::v1::ParseEvaluation(nlohmann::json::parse(R"({"job_id": 9, "tasks": [
      {"task": "push", "episodes": 20, "successes": 3, "success_rate": 0.15,
       "mean_return": -0.0421, "mean_length": 140, "checkpoint_step": 600, "policy": "bc",
       "fp8": true, "evaluated_at": "2026-01-02T03:00:00.000Z"},
      {"task": "reach", "episodes": 20, "successes": 11, "success_rate": 0.55,
       "mean_return": 1.2, "mean_length": 30, "checkpoint_step": 600, "policy": "bc",
       "fp8": false, "evaluated_at": "2026-01-02T03:00:00.000Z"}]})"));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(EvaluationTable(*reply),
            "TASK   EPISODES  SUCCESSES  SUCCESS_RATE  MEAN_RETURN  POLICY    STEP\n"
            "push   20        3          0.150         -0.042       bc (fp8)  600\n"
            "reach  20        11         0.550         1.200        bc        600\n");
  EXPECT_EQ(EvaluationTable(api::v1::Evaluation{9, {}}), "no evaluation results yet\n");
}

TEST(FormatTest, HumanNumber) {
  EXPECT_EQ(HumanNumber(5), "5");
  EXPECT_EQ(HumanNumber(12345), "12.3k");
  EXPECT_EQ(HumanNumber(4560000), "4.56M");
  EXPECT_EQ(HumanNumber(999), "999");
}

TEST(FormatTest, ProgressLine) {
  nlohmann::json job = {{"state", "RUNNING"},
                        {"last_step", {{"step", 50}, {"steps", 200}, {"loss", 0.5},
                                       {"tokens_per_s", 12345.0}}}};
  std::string line = ProgressLine(job, 20);
  EXPECT_EQ(line.substr(0, 22), "[#####...............]");
  EXPECT_NE(line.find(" 25%"), std::string::npos);
  EXPECT_NE(line.find("step 50/200"), std::string::npos);
  EXPECT_NE(line.find("loss 0.5000"), std::string::npos);
  EXPECT_NE(line.find("12.3k tok/s"), std::string::npos);
  EXPECT_EQ(line.find("return"), std::string::npos);

  // An rl update: its own fields, none of a training step's shown as 0.
  nlohmann::json rl = {{"state", "RUNNING"},
                       {"last_step", {{"step", 3}, {"steps", 12}, {"env_steps", 3072},
                                      {"env_steps_per_s", 2150.0}, {"mean_return", 0.4216},
                                      {"success_rate", 0.25}, {"eval_success_rate", 0.5},
                                      {"policy_loss", -0.01}}}};
  line = ProgressLine(rl, 12);
  EXPECT_NE(line.find("update 3/12"), std::string::npos) << line;
  EXPECT_NE(line.find("return 0.422"), std::string::npos) << line;
  EXPECT_NE(line.find("success 25%"), std::string::npos) << line;
  EXPECT_NE(line.find("2.15k env steps/s"), std::string::npos) << line;
  EXPECT_NE(line.find("eval success 50%"), std::string::npos) << line;
  EXPECT_EQ(line.find("loss"), std::string::npos) << line;
  EXPECT_EQ(line.find("tok/s"), std::string::npos) << line;
  // An update in which no episode ended: no return or success rate at all.
  rl["last_step"]["mean_return"] = nullptr;
  rl["last_step"]["success_rate"] = nullptr;
  line = ProgressLine(rl, 12);
  EXPECT_EQ(line.find("return"), std::string::npos) << line;
  EXPECT_EQ(line.find(" success"), line.find("eval success") + 4) << line;

  nlohmann::json pending = {{"state", "PENDING"}, {"last_step", nullptr},
                            {"reason", "waiting for 2 nodes"}};
  EXPECT_NE(ProgressLine(pending, 10).find("waiting for 2 nodes"), std::string::npos);
  EXPECT_NE(ProgressLine({{"state", "SUCCEEDED"}}, 10).find("100%"), std::string::npos);
  // A script that reports steps without a total: its step, no "/0".
  nlohmann::json own = {{"state", "RUNNING"}, {"last_step", {{"step", 99}, {"loss", 0.5}}}};
  line = ProgressLine(own, 10);
  EXPECT_NE(line.find("step 99  loss 0.5000"), std::string::npos) << line;
  EXPECT_EQ(line.find("/0"), std::string::npos) << line;
}

TEST(RefusalTextTest, LeadsWithTheFieldUnlessTheMessageSaysIt) {
  EXPECT_EQ(RefusalText(common::InvalidArgument("is required", "resources")),
            "resources: is required");
  EXPECT_EQ(RefusalText(common::InvalidArgument("resources.nodes must be at least 1",
                                                "resources.nodes")),
            "resources.nodes must be at least 1 (field resources.nodes)");
  EXPECT_EQ(RefusalText(common::InvalidArgument("no such job")), "no such job");
}

TEST(EvalEventLineTest, TrainingRunsAndEvalJobsEachGetTheirOwnLine) {
  EXPECT_EQ(EvalEventLine(nlohmann::json{{"action_mse", 0.143}, {"zero_action_mse", 0.4909},
                                         {"samples", 64}, {"euler_steps", 4}}),
            "evaluation: action MSE 0.1430 vs 0.4909 for zero actions (64 held-out samples, 4 "
            "Euler steps)\n");
  const nlohmann::json eval_job = nlohmann::json::parse(R"({"type": "eval", "policy": "bc",
      "tasks": [{"task": "push", "episodes": 64, "successes": 58, "success_rate": 0.90625},
                {"task": "pick_place", "episodes": 64, "successes": 3, "success_rate": 0.046875}]})");
  EXPECT_EQ(EvalEventLine(eval_job), "evaluation: push 0.906 (58/64), pick_place 0.047 (3/64)\n");
  EXPECT_EQ(EvalEventLine(nlohmann::json::object()), "");
}

}  // namespace
}  // namespace cli
