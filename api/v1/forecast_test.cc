#include "api/v1/forecast.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

constexpr int64_t kForecastTime = 1'767'323'045'000;  // 2026-01-02T03:04:05.000Z

// The answer of a dry run placed behind a running job.
Forecast DryRun() {
  Forecast f;
  f.made_ms = kForecastTime;
  f.run_seconds = 100;
  f.run_time_source = "time_limit";
  f.end_ms = kForecastTime + 1'300'000;
  f.reasons = {"starts when job 17 ends (expected 2026-01-02T03:24:05.000Z)"};
  ForecastStart s;
  s.start_ms = kForecastTime + 1'200'000;
  s.wait_seconds = 1200;
  s.placement = ForecastPlacement{"cpu", {{2, "n2", 2, 2}}};
  s.jobs_ahead = 1;
  f.start = s;
  f.cluster = ForecastCluster{kForecastTime - 500, "scheduler_snapshot", 1.5};
  f.dry_run = true;
  return f;
}

StoredForecast Stored() {
  StoredForecast s;
  s.made_ms = kForecastTime - 4'000;
  s.start_ms = kForecastTime + 1'200'000;
  s.run_seconds = 100;
  s.start_error_seconds = -2.5;
  return s;
}

TEST(ForecastViewTest, WritesADryRunsAnswer) {
  EXPECT_EQ(ToJson(DryRun()).dump(),
            R"({"admitted":true,"as_of":"2026-01-02T03:04:04.500Z",)"
            R"("cluster_from":"scheduler_snapshot","dry_run":true,"hand_over_seconds":1.5,)"
            R"("jobs_ahead":1,"made_at":"2026-01-02T03:04:05.000Z",)"
            R"("placement":{"nodes":[{"node":"n2","node_id":2,"ranks":2,"slots":2}],)"
            R"("slot_type":"cpu"},"predicted_end":"2026-01-02T03:25:45.000Z",)"
            R"("predicted_run_seconds":100.0,"predicted_start":"2026-01-02T03:24:05.000Z",)"
            R"("predicted_wait_seconds":1200.0,)"
            R"j("reasons":["starts when job 17 ends (expected 2026-01-02T03:24:05.000Z)"],)j"
            R"("run_time_source":"time_limit","starts_now":false})");
}

TEST(ForecastViewTest, WritesAJobHoldingSlotsWithoutAStart) {
  Forecast f;
  f.made_ms = kForecastTime;
  f.reasons = {"run time unknown: no time limit"};
  f.job = ForecastJob{18, "RUNNING", Stored()};
  EXPECT_EQ(
      ToJson(f).dump(),
      R"({"job_id":18,"made_at":"2026-01-02T03:04:05.000Z","predicted_end":null,)"
      R"("predicted_run_seconds":null,"reasons":["run time unknown: no time limit"],)"
      R"("run_time_source":null,"started_at":null,"state":"RUNNING",)"
      R"("submitted_forecast":{"end_error_seconds":null,"made_at":"2026-01-02T03:04:01.000Z",)"
      R"("predicted_end":null,"predicted_run_seconds":100.0,)"
      R"("predicted_start":"2026-01-02T03:24:05.000Z","start_error_seconds":-2.5}})");
  f.job->submitted.reset();
  EXPECT_TRUE(ToJson(f)["submitted_forecast"].is_null());
}

TEST(ForecastViewTest, RoundTripsEveryShape) {
  std::vector<Forecast> shapes;
  shapes.push_back(DryRun());
  Forecast pending = DryRun();  // a pending job's: no dry run, and the job
  pending.dry_run = false;
  pending.job = ForecastJob{18, "PENDING", Stored()};
  shapes.push_back(pending);
  Forecast unknown = pending;  // nothing predicted, nothing stored
  unknown.start->start_ms.reset();
  unknown.start->wait_seconds.reset();
  unknown.start->placement.reset();
  unknown.run_seconds.reset();
  unknown.run_time_source.reset();
  unknown.end_ms.reset();
  unknown.job->submitted.reset();
  shapes.push_back(unknown);
  Forecast holding;  // a job holding slots
  holding.made_ms = kForecastTime;
  holding.started_ms = kForecastTime - 60'000;
  holding.run_seconds = 600;
  holding.run_time_source = "history";
  holding.end_ms = kForecastTime + 540'000;
  holding.job = ForecastJob{19, "RUNNING", std::nullopt};
  shapes.push_back(holding);
  Forecast stored_detail = DryRun();  // as a submitted job's forecast is made: no source
  stored_detail.cluster.reset();
  stored_detail.dry_run = false;
  shapes.push_back(stored_detail);
  for (const Forecast& f : shapes) {
    auto back = ParseForecast(ToJson(f));
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << ToJson(f).dump();
    EXPECT_EQ(*back, f) << ToJson(f).dump();
  }
  auto stored = ParseStoredForecast(ToJson(Stored()));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, Stored());
}

TEST(ForecastViewTest, MissingOrWrongFieldsAreRefusedWithTheirPath) {
  auto field_of = [](const json& j) { return ParseForecast(j).status().field(); };
  Forecast pending = DryRun();
  pending.job = ForecastJob{18, "PENDING", Stored()};
  const json good = ToJson(pending);
  json j = good;
  j["placement"]["nodes"][0].erase("ranks");
  EXPECT_EQ(field_of(j), "placement.nodes[0].ranks");
  EXPECT_EQ(ParseForecast(j).status().message(), "is required");
  EXPECT_EQ(ParseForecast(j).status().code(), common::Code::kInvalidArgument);
  j = good;
  j["reasons"][0] = 3;
  EXPECT_EQ(field_of(j), "reasons[0]");
  j = good;
  j["submitted_forecast"]["made_at"] = "yesterday";
  EXPECT_EQ(field_of(j), "submitted_forecast.made_at");
  j = good;
  j.erase("jobs_ahead");  // a start's fields come together
  EXPECT_EQ(field_of(j), "jobs_ahead");
  j = good;
  j.erase("hand_over_seconds");  // as do its cluster's
  EXPECT_EQ(field_of(j), "hand_over_seconds");
  j = good;
  j.erase("state");  // and its job's
  EXPECT_EQ(field_of(j), "state");
  j = good;
  j.erase("admitted");
  EXPECT_EQ(field_of(j), "admitted");
  j = good;
  j["predicted_run_seconds"] = "long";
  EXPECT_EQ(field_of(j), "predicted_run_seconds");
  j = good;
  j["placement"] = json::array();
  EXPECT_EQ(field_of(j), "placement");
  j = good;
  j.erase("starts_now");  // no start: a job holding slots, which says when it started
  EXPECT_EQ(field_of(j), "started_at");
  EXPECT_EQ(field_of(json::array()), "response");
  EXPECT_EQ(ParseStoredForecast(json{{"made_at", "2026-01-02T03:04:05.000Z"}}).status().field(),
            "predicted_start");
}

}  // namespace
}  // namespace api::v1
