#include "api/v1/plan.h"

#include <gtest/gtest.h>

namespace api::v1 {
namespace {

using nlohmann::json;

Plan TwoSizes() {
  PlanSize s;
  s.gpus = 2;
  s.nodes = 1;
  s.samples_per_rank = 16;
  s.step_seconds = 0.5;
  s.compute_seconds = 0.4;
  s.allreduce_seconds = 0.2;
  s.exposed_allreduce_seconds = 0.05;
  s.data_seconds = 0.05;
  s.tokens_per_s = 5632;
  s.samples_per_s = 64;
  s.epoch_seconds = 120;
  s.run_seconds = 100;
  s.efficiency = 1;
  s.bottleneck = "compute";
  s.memory_per_rank_bytes = 7e6;
  s.memory = {1e6, 1e6, 2e6, 3e6};
  s.fits_memory = true;
  PlanSize big = s;
  big.gpus = 16;
  big.nodes = 8;
  big.epoch_seconds.reset();
  big.bottleneck = "communication";
  big.efficiency = 0.4;
  return {"this-machine", "ring", "fp32", false, 3'494'663, 1.99e7, 88, {s, big}, 2, 16};
}

TEST(PlanViewTest, WritesEveryField) {
  const json j = ToJson(TwoSizes());
  EXPECT_EQ(j["sizes"][0].dump(),
            R"({"allreduce_seconds":0.2,"bottleneck":"compute","compute_seconds":0.4,)"
            R"("data_seconds":0.05,"efficiency":1.0,"epoch_seconds":120.0,)"
            R"("exposed_allreduce_seconds":0.05,"fits_memory":true,"gpus":2,)"
            R"("memory":{"activations":3000000.0,"grads":1000000.0,"optimizer":2000000.0,)"
            R"("params":1000000.0},"memory_per_rank_bytes":7000000.0,"nodes":1,)"
            R"("run_seconds":100.0,"samples_per_rank":16.0,"samples_per_s":64.0,)"
            R"("step_seconds":0.5,"tokens_per_s":5632.0})");
  EXPECT_TRUE(j["sizes"][1]["epoch_seconds"].is_null());
  EXPECT_EQ(j["params"], 3'494'663);
  EXPECT_EQ(j["efficiency_below_half_at_gpus"], 16);
  Plan none = TwoSizes();
  none.efficiency_below_half_at_gpus.reset();
  EXPECT_TRUE(ToJson(none)["efficiency_below_half_at_gpus"].is_null());
}

TEST(PlanViewTest, RoundTrips) {
  auto back = ParsePlan(ToJson(TwoSizes()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, TwoSizes());
}

TEST(PlanViewTest, MissingOrWrongFieldsAreRefusedWithTheirPath) {
  json j = ToJson(TwoSizes());
  j["sizes"][1]["memory"].erase("grads");
  EXPECT_EQ(ParsePlan(j).status().field(), "sizes[1].memory.grads");
  EXPECT_EQ(ParsePlan(j).status().code(), common::Code::kInvalidArgument);
  j = ToJson(TwoSizes());
  j["sizes"][0]["gpus"] = 2.5;
  EXPECT_EQ(ParsePlan(j).status().field(), "sizes[0].gpus");
  j = ToJson(TwoSizes());
  j["efficiency_below_half_at_gpus"] = "16";
  EXPECT_EQ(ParsePlan(j).status().field(), "efficiency_below_half_at_gpus");
  j = ToJson(TwoSizes());
  j.erase("precision");
  EXPECT_EQ(ParsePlan(j).status().field(), "precision");
  EXPECT_EQ(ParsePlan(json::array()).status().field(), "response");
}

}  // namespace
}  // namespace api::v1
