#include "controlplane/service/metrics_history.h"

#include <gtest/gtest.h>

namespace controlplane::service {
namespace {

using nlohmann::json;

TEST(MetricsHistoryTest, StrideDoublesWithTheStep) {
  EXPECT_EQ(StepStride(1), 1);
  EXPECT_EQ(StepStride(kKeepEveryStepUpTo), 1);
  EXPECT_EQ(StepStride(kKeepEveryStepUpTo + 1), 2);
  EXPECT_EQ(StepStride(2 * kKeepEveryStepUpTo), 2);
  EXPECT_EQ(StepStride(2 * kKeepEveryStepUpTo + 1), 4);
  EXPECT_EQ(StepStride(10000), 16);
  EXPECT_TRUE(KeepStep(-3));
  EXPECT_TRUE(KeepStep(999));
  EXPECT_FALSE(KeepStep(1001));
  EXPECT_TRUE(KeepStep(1002));
}

TEST(MetricsHistoryTest, KeptRowsGrowWithTheLogarithmOfTheLength) {
  auto kept = [](int64_t steps) {
    int64_t n = 0;
    for (int64_t s = 1; s <= steps; ++s) n += KeepStep(s);
    return n;
  };
  const int64_t k = kKeepEveryStepUpTo;
  EXPECT_EQ(kept(k), k);
  EXPECT_EQ(kept(2 * k), k + k / 2);
  EXPECT_EQ(kept(4 * k), k + k);
  // Bound from the header: K + K/2 * ceil(log2(S/K)).
  for (int64_t s : {int64_t{10000}, int64_t{123457}, int64_t{1000000}}) {
    const double bound = k + k / 2.0 * std::ceil(std::log2(static_cast<double>(s) / k));
    EXPECT_LE(kept(s), bound) << s;
  }
  EXPECT_LE(kept(1000000), 6000);
}

TEST(MetricsHistoryTest, StepOfReadsIntegerAndFractionalSteps) {
  EXPECT_EQ(StepOf(json{{"step", 12}}), 12);
  EXPECT_EQ(StepOf(json{{"step", 12.7}}), 12);
  EXPECT_FALSE(StepOf(json{{"step", "12"}}));
  EXPECT_FALSE(StepOf(json{{"loss", 1.0}}));
  EXPECT_FALSE(StepOf(json::array()));
  EXPECT_FALSE(StepOf(json{{"step", 1e300}}));
}

TEST(MetricsHistoryTest, ParsesTheQuery) {
  auto r = ParseMetricsRequest("loss,tokens_per_s,loss", "", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->names, (std::vector<std::string>{"loss", "tokens_per_s"}));
  EXPECT_EQ(r->query.max_points, kDefaultMaxPoints);
  EXPECT_EQ(r->query.since_step, INT64_MIN);

  auto step = ParseMetricsRequest("", "250", "10");
  ASSERT_TRUE(step.ok());
  EXPECT_TRUE(step->names.empty());
  EXPECT_EQ(step->query.since_step, 250);
  EXPECT_EQ(step->query.max_points, 10);

  auto time = ParseMetricsRequest("", "2026-01-02T03:04:05.250Z", "");
  ASSERT_TRUE(time.ok()) << time.status().ToString();
  EXPECT_EQ(time->query.since_ms, 1767323045250);
  EXPECT_EQ(time->query.since_step, INT64_MIN);

  EXPECT_EQ(ParseMetricsRequest("loss,", "", "").status().field(), "names");
  EXPECT_EQ(ParseMetricsRequest("a b", "", "").status().field(), "names");
  EXPECT_EQ(ParseMetricsRequest("", "yesterday", "").status().field(), "since");
  EXPECT_EQ(ParseMetricsRequest("", "2026-01-02 03:04:05Z", "").status().field(), "since");
  // Times are read as everywhere else (common::ParseUtcTime; found by tests/fuzz): no date
  // before 1970, no 31 February.
  EXPECT_EQ(ParseMetricsRequest("", "1013-01-02T03:04:05.5z", "").status().field(), "since");
  EXPECT_EQ(ParseMetricsRequest("", "2026-02-31T00:00:00Z", "").status().field(), "since");
  EXPECT_EQ(ParseMetricsRequest("", "", "0").status().field(), "max_points");
  EXPECT_EQ(ParseMetricsRequest("", "", "5001").status().field(), "max_points");
  std::string many;
  for (int i = 0; i < 33; ++i) many += (i ? ",n" : "n") + std::to_string(i);
  EXPECT_EQ(ParseMetricsRequest(many, "", "").status().field(), "names");
}

TEST(MetricsHistoryTest, BuildsOneSeriesPerName) {
  std::vector<StepSample> samples = {
      {1, 1000, {{"step", 1}, {"loss", 2.0}, {"tokens_per_s", 10}}},
      {2, 2000, {{"step", 2}, {"loss", 1.5}, {"note", "text"}}},
      {3, 3000, {{"step", 3}, {"loss", "nan"}, {"tokens_per_s", 12.5}}},
  };
  json named = BuildSeries({"loss", "absent"}, samples);
  EXPECT_EQ(named["series"]["loss"], json::parse("[[1,1000,2.0],[2,2000,1.5]]"));
  EXPECT_EQ(named["series"]["absent"], json::array());
  json all = BuildSeries({}, samples);
  EXPECT_EQ(all["series"].size(), 2u) << all.dump();  // loss, tokens_per_s; not step or note
  EXPECT_EQ(all["series"]["tokens_per_s"], json::parse("[[1,1000,10.0],[3,3000,12.5]]"));
}

}  // namespace
}  // namespace controlplane::service
