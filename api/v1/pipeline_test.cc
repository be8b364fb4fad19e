#include "api/v1/pipeline.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

constexpr int64_t kPipelineTime = 1'767'322'800'000;  // 2026-01-02T03:00:00.000Z

Pipeline Recipe() {
  PipelineStep bc;
  bc.name = "bc";
  bc.state = "succeeded";
  bc.reason = "job 11 SUCCEEDED";
  bc.kind = "train";
  bc.retries = 1;
  bc.jobs = {10, 11};
  bc.started_ms = kPipelineTime;
  bc.finished_ms = kPipelineTime + 60'000;
  PipelineStep gate;
  gate.name = "gate";
  gate.state = "pending";
  gate.needs = {"bc"};
  PipelineStep data;
  data.name = "data";
  data.state = "running";
  data.kind = "import";
  data.dataset_id = 7;
  data.gate = json{{"value", 0.5}, {"threshold", 0.4}, {"passed", true}};
  Pipeline p;
  p.id = 4;
  p.tenant_id = 2;
  p.tenant = "a";
  p.name = "recipe";
  p.state = "running";
  p.steps = {bc, gate, data};
  p.spec = json{{"name", "recipe"}, {"steps", json::array()}};
  p.created_ms = kPipelineTime;
  p.updated_ms = kPipelineTime + 1'000;
  return p;
}

TEST(PipelineViewTest, WritesEveryStepFieldAndDerivesAttemptsAndJobId) {
  const json j = ToJson(Recipe());
  EXPECT_EQ(j["steps"][0].dump(),
            R"({"attempts":2,"finished_at":"2026-01-02T03:01:00.000Z","gate":null,"job_id":11,)"
            R"("jobs":[10,11],"kind":"train","name":"bc","needs":[],"reason":"job 11 SUCCEEDED",)"
            R"("retries":1,"started_at":"2026-01-02T03:00:00.000Z","state":"succeeded"})");
  EXPECT_TRUE(j["steps"][1]["kind"].is_null());
  EXPECT_TRUE(j["steps"][1]["job_id"].is_null());
  EXPECT_FALSE(j["steps"][1].contains("dataset_id"));
  EXPECT_EQ(j["steps"][2]["dataset_id"], 7);
  EXPECT_EQ(j["created_at"], "2026-01-02T03:00:00.000Z");
  EXPECT_TRUE(j["finished_at"].is_null());
  EXPECT_EQ(j["spec"]["name"], "recipe");
  Pipeline listed = Recipe();
  listed.spec.reset();
  EXPECT_FALSE(ToJson(listed).contains("spec"));
}

TEST(PipelineViewTest, RoundTrips) {
  Pipeline listed = Recipe();
  listed.spec.reset();
  listed.finished_ms = kPipelineTime + 5'000;
  const PipelineList list{{listed, listed}, "3"};
  auto l = ParsePipelineList(ToJson(list));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(*l, list);
  auto p = ParsePipeline(ToJson(Recipe()));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, Recipe());

  PipelineDryRun dry;
  dry.name = "recipe";
  dry.made_ms = kPipelineTime;
  Forecast f;
  f.made_ms = kPipelineTime;
  f.run_seconds = 60;
  f.run_time_source = "time_limit";
  f.end_ms = kPipelineTime + 60'000;
  f.start = ForecastStart{true, kPipelineTime, 0.0, ForecastPlacement{"cpu", {{1, "n1", 1, 1}}}, 0};
  f.cluster = ForecastCluster{kPipelineTime, "store", 0};
  f.dry_run = true;
  dry.steps = {{"bc", {}, "train", f, kPipelineTime, kPipelineTime + 60'000, std::nullopt},
               {"data",
                {"bc"},
                "import",
                std::nullopt,
                kPipelineTime + 60'000,
                std::nullopt,
                "an import's run time is not predicted"}};
  const json dj = ToJson(dry);
  EXPECT_EQ(dj["dry_run"], true);
  EXPECT_EQ(dj["admitted"], true);
  EXPECT_TRUE(dj["predicted_end"].is_null());
  EXPECT_FALSE(dj["steps"][1].contains("forecast"));
  EXPECT_FALSE(dj["steps"][0].contains("not_predicted"));
  auto d = ParsePipelineDryRun(dj);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, dry);
  dry.end_ms = kPipelineTime + 120'000;
  EXPECT_EQ(*ParsePipelineDryRun(ToJson(dry)), dry);
}

TEST(PipelineViewTest, MissingOrWrongFieldsAreRefusedWithTheirPath) {
  const json good = ToJson(Recipe());
  json j = good;
  j["steps"][0]["jobs"][1] = "11";
  EXPECT_EQ(ParsePipeline(j).status().field(), "steps[0].jobs[1]");
  EXPECT_EQ(ParsePipeline(j).status().code(), common::Code::kInvalidArgument);
  j = good;
  j["steps"][1]["needs"][0] = 1;
  EXPECT_EQ(ParsePipeline(j).status().field(), "steps[1].needs[0]");
  j = good;
  j["steps"][2].erase("retries");
  EXPECT_EQ(ParsePipeline(j).status().field(), "steps[2].retries");
  EXPECT_EQ(ParsePipeline(j).status().message(), "is required");
  j = good;
  j["steps"][2]["gate"] = "passed";
  EXPECT_EQ(ParsePipeline(j).status().field(), "steps[2].gate");
  j = good;
  j["spec"] = json::array();
  EXPECT_EQ(ParsePipeline(j).status().field(), "spec");
  j = good;
  j.erase("finished_at");
  EXPECT_EQ(ParsePipeline(j).status().field(), "finished_at");
  EXPECT_EQ(ParsePipelineList(json{{"pipelines", {good}}}).status().field(), "next_cursor");
  const json dry = {{"dry_run", true},
                    {"admitted", true},
                    {"name", "r"},
                    {"made_at", "2026-01-02T03:00:00.000Z"},
                    {"predicted_end", nullptr},
                    {"steps",
                     {{{"name", "bc"},
                       {"needs", json::array()},
                       {"kind", "train"},
                       {"predicted_start", nullptr},
                       {"predicted_end", nullptr},
                       {"forecast", {{"made_at", "now"}}}}}}};
  EXPECT_EQ(ParsePipelineDryRun(dry).status().field(), "steps[0].forecast.made_at");
  EXPECT_EQ(ParsePipelineDryRun(json::array()).status().field(), "response");
}

}  // namespace
}  // namespace api::v1
