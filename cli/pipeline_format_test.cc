#include "cli/pipeline_format.h"

#include <gtest/gtest.h>

namespace cli {
namespace {

using nlohmann::json;

// A reply read with the view's codec, as the CLI reads it.
template <typename View>
View Read(common::Result<View> (*parse)(const json&), const std::string& text) {
  auto v = parse(json::parse(text));
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : View{};
}

TEST(PipelineFormatTest, ShowsEachStepWithItsJobAttemptsAndGateValues) {
  const auto p = Read(api::v1::ParsePipeline, R"({
    "id": 4, "tenant_id": 1, "tenant": "a", "name": "recipe", "state": "failed",
    "reason": "step gate gate_failed: low", "created_at": "2026-01-01T00:00:00.000Z",
    "updated_at": "2026-01-01T00:10:00.000Z", "finished_at": "2026-01-01T00:10:00.000Z",
    "steps": [
      {"name": "bc", "state": "succeeded", "kind": "train", "needs": [], "retries": 1,
       "jobs": [10, 11], "job_id": 11, "attempts": 2, "gate": null,
       "started_at": null, "finished_at": null, "reason": "job 11 SUCCEEDED"},
      {"name": "gate", "state": "gate_failed", "kind": null, "needs": ["bc"], "retries": 0,
       "jobs": [], "job_id": null, "attempts": 0, "started_at": null, "finished_at": null,
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
  const std::string step = R"("reason": "", "kind": "command", "needs": [], "retries": 0,
    "jobs": [], "job_id": null, "attempts": 0, "gate": null, "started_at": null,
    "finished_at": null)";
  const auto list = Read(api::v1::ParsePipelineList,
                         R"({"pipelines": [{"id": 2, "tenant_id": 1, "tenant": "a", "name": "r",
    "state": "running", "created_at": "2026-01-01T00:00:00.000Z",
    "updated_at": "2026-01-01T00:00:00.000Z", "finished_at": null, "reason": "",
    "steps": [{"name": "a", "state": "succeeded", )" +
                             step + R"(}, {"name": "b", "state": "running", )" + step +
                             R"(}]}], "next_cursor": null})");
  const std::string text = PipelinesTable(list);
  EXPECT_NE(text.find("2   r     running  1/2"), std::string::npos) << text;
  EXPECT_EQ(GateCell(nullptr), "-");
  EXPECT_EQ(GateCell(json{{"value", 0.9}, {"threshold", 0.5}, {"passed", true}}),
            "0.9000 >= 0.5000 ok");
}

TEST(PipelineFormatTest, ADryRunShowsEachStepsWaitRunAndTimesAndWhyOneHasNone) {
  const auto dry = Read(api::v1::ParsePipelineDryRun, R"({"dry_run": true, "admitted": true,
    "name": "recipe", "made_at": "2026-01-01T00:00:00.000Z", "predicted_end": null,
    "steps": [
      {"name": "import", "kind": "import", "needs": [],
       "predicted_start": "2026-01-01T00:00:00.000Z",
       "predicted_end": null, "not_predicted": "an import's run time is not predicted"},
      {"name": "train", "kind": "train", "needs": ["import", "x"], "predicted_start": null,
       "predicted_end": null, "forecast": {"made_at": "2026-01-01T00:00:00.000Z",
       "starts_now": false, "predicted_start": "2026-01-01T00:00:12.400Z",
       "predicted_wait_seconds": 12.4, "predicted_run_seconds": 600,
       "run_time_source": "time_limit", "predicted_end": "2026-01-01T00:10:12.400Z",
       "placement": null, "jobs_ahead": 0, "reasons": []}}]})");
  const std::string text = PipelineDryRunText(dry);
  EXPECT_EQ(
      text.rfind("admitted (dry run: nothing submitted): pipeline recipe, expected to end -", 0),
      0u)
      << text;
  EXPECT_NE(text.find("train   train   import,x  12      600"), std::string::npos) << text;
  EXPECT_NE(text.find("import: not predicted: an import's run time is not predicted"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace cli
