#include "cli/pipeline_format.h"

#include <gtest/gtest.h>

namespace cli {
namespace {

using nlohmann::json;

TEST(PipelineFormatTest, ShowsEachStepWithItsJobAttemptsAndGateValues) {
  const json p = json::parse(R"({
    "id": 4, "name": "recipe", "state": "failed", "reason": "step gate gate_failed: low",
    "steps": [
      {"name": "bc", "state": "succeeded", "job_id": 11, "attempts": 2, "gate": null,
       "reason": "job 11 SUCCEEDED"},
      {"name": "gate", "state": "gate_failed", "job_id": null, "attempts": 0,
       "gate": {"value": 0.5, "threshold": 0.57, "minus": 0.03, "passed": false,
                "reference": {"step": "eval", "value": 0.6}},
       "reason": "eval-fp8 success_rate 0.5000 is below the threshold 0.5700"}]})");
  const std::string text = PipelineDetail(p);
  EXPECT_NE(text.find("pipeline 4 (recipe): failed"), std::string::npos) << text;
  EXPECT_NE(text.find("bc    succeeded    11   2"), std::string::npos) << text;
  EXPECT_NE(text.find("0.5000 >= 0.5700 (eval 0.6000 - 0.03) FAILED"), std::string::npos) << text;
  EXPECT_NE(text.find("gate: eval-fp8 success_rate 0.5000 is below"), std::string::npos) << text;
}

TEST(PipelineFormatTest, ListsCountSucceededSteps) {
  const json reply = json::parse(R"({"pipelines": [{"id": 2, "name": "r", "state": "running",
    "created_at": "2026-01-01T00:00:00Z", "reason": "",
    "steps": [{"state": "succeeded"}, {"state": "running"}]}], "next_cursor": null})");
  const std::string text = PipelinesTable(reply);
  EXPECT_NE(text.find("2   r     running  1/2"), std::string::npos) << text;
  EXPECT_EQ(GateCell(nullptr), "-");
  EXPECT_EQ(GateCell(json{{"value", 0.9}, {"threshold", 0.5}, {"passed", true}}),
            "0.9000 >= 0.5000 ok");
}

TEST(PipelineFormatTest, ADryRunShowsEachStepsWaitRunAndTimesAndWhyOneHasNone) {
  const json reply = json::parse(R"({"dry_run": true, "name": "recipe", "predicted_end": null,
    "steps": [
      {"name": "import", "kind": "import", "needs": [], "predicted_start": "T0",
       "predicted_end": null, "not_predicted": "an import's run time is not predicted"},
      {"name": "train", "kind": "train", "needs": ["import", "x"], "predicted_start": null,
       "predicted_end": null, "forecast": {"predicted_wait_seconds": 12.4,
       "predicted_run_seconds": 600}}]})");
  const std::string text = PipelineDryRunText(reply);
  EXPECT_EQ(text.rfind("admitted (dry run: nothing submitted): pipeline recipe, expected to end -",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find("train   train   import,x  12      600"), std::string::npos) << text;
  EXPECT_NE(text.find("import: not predicted: an import's run time is not predicted"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace cli
