// POST /v1/plan's body: parsing, defaults from the JobSpec, errors naming their field.
#include "planner/plan_request.h"

#include <gtest/gtest.h>

namespace planner {
namespace {

using nlohmann::json;

json Request() {
  return json::parse(R"({
    "job": {"name": "p", "kind": "train",
            "engine": {"model": {"d_model": 256, "layers": 4, "heads": 8, "mlp": 1024},
                       "data": {"rows_per_step": 8, "tokens_per_row": 512},
                       "optim": {"steps": 100}}},
    "gpus": [1, 2, 16],
    "cluster": {"name": "c", "ranks_per_node": 2,
                "compute": {"flops_per_s": 2e10, "memory_gbps": 5},
                "intra": {"gbps": 3, "latency_us": 2},
                "inter": {"gbps": 1.25, "latency_us": 30},
                "allreduce": "ring", "reader_samples_per_s": 5000}
  })");
}

std::string FieldOf(const json& body) {
  auto r = ParsePlanRequest(body, api::SpecLimits{});
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().field();
}

TEST(PlanRequest, ParsesAndPlans) {
  auto r = ParsePlanRequest(Request(), api::SpecLimits{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus, (std::vector<int>{1, 2, 16}));
  EXPECT_DOUBLE_EQ(r->cluster.inter.bytes_per_s, 1.25e9);
  EXPECT_DOUBLE_EQ(r->cluster.inter.latency_s, 30e-6);
  EXPECT_DOUBLE_EQ(r->workload.tokens_per_sample, kSimReachMeanContextTokens + 16);
  EXPECT_DOUBLE_EQ(r->workload.samples_per_rank, 8 * 512 / (kSimReachMeanContextTokens + 16));
  EXPECT_EQ(r->workload.run_steps, 100);
  auto plan = MakePlan(r->workload, r->cluster, r->options, r->gpus);
  ASSERT_TRUE(plan.ok());
  json j = PlanToJson(*plan, *r);
  ASSERT_EQ(j["sizes"].size(), 3u);
  EXPECT_EQ(j["sizes"][2]["gpus"], 16);
  EXPECT_EQ(j["sizes"][2]["nodes"], 8);
  EXPECT_TRUE(j["sizes"][0]["epoch_seconds"].is_null());
  EXPECT_NEAR(j["sizes"][1]["run_seconds"].get<double>(),
              100 * j["sizes"][1]["step_seconds"].get<double>(), 1e-9);
  EXPECT_EQ(j["params"], ParamCount(r->workload.model));
}

TEST(PlanRequest, GpuClusterFromPeakAndEfficiency) {
  json b = Request();
  b["cluster"]["compute"] = {{"tflops", 400}, {"efficiency", 0.5}, {"bf16_speedup", 2}};
  b["options"] = {{"precision", "bf16"}, {"fp8_allreduce", true}};
  auto r = ParsePlanRequest(b, api::SpecLimits{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->cluster.compute.flops_per_s, 200e12);
  EXPECT_DOUBLE_EQ(r->cluster.compute.half_rate_width, 0);
  EXPECT_EQ(r->options.precision, Precision::kBf16);
  EXPECT_TRUE(r->options.fp8_allreduce);
}

TEST(PlanRequest, PlansMoreRanksThanTheServerRuns) {
  json b = Request();
  b["gpus"] = {4096};
  EXPECT_TRUE(ParsePlanRequest(b, api::SpecLimits{}).ok());
}

TEST(PlanRequest, ErrorsNameTheField) {
  json b = Request();
  b["job"]["engine"]["model"]["d_model"] = 0;
  EXPECT_EQ(FieldOf(b), "job.engine.model.d_model");
  b = Request();
  b["job"]["kind"] = "command";
  b["job"].erase("engine");
  b["job"]["command"] = {"true"};
  EXPECT_EQ(FieldOf(b), "job.kind");
  b = Request();
  b.erase("gpus");
  EXPECT_EQ(FieldOf(b), "gpus");
  b = Request();
  b["gpus"] = {8, -1};
  EXPECT_EQ(FieldOf(b), "gpus[1]");
  b["gpus"] = {8, 18446744073709551615ull};
  EXPECT_EQ(FieldOf(b), "gpus[1]");
  b["gpus"] = json::array();
  EXPECT_EQ(FieldOf(b), "gpus");
  b = Request();
  b["cluster"]["inter"]["gbps"] = 0;
  EXPECT_EQ(FieldOf(b), "cluster.inter.gbps");
  b = Request();
  b["cluster"]["intra"].erase("gbps");
  EXPECT_EQ(FieldOf(b), "cluster.intra.gbps");
  b = Request();
  b["cluster"]["allreduce"] = "tree";
  EXPECT_EQ(FieldOf(b), "cluster.allreduce");
  b = Request();
  b["cluster"]["ranks_per_node"] = 1.5;
  EXPECT_EQ(FieldOf(b), "cluster.ranks_per_node");
  b = Request();
  b["cluster"]["compute"]["tflops"] = 100;
  EXPECT_EQ(FieldOf(b), "cluster.compute.flops_per_s");
  b = Request();
  b["cluster"]["compute"]["half_rate_width"] = -3;
  EXPECT_EQ(FieldOf(b), "cluster.compute.half_rate_width");
  b = Request();
  b["cluster"]["compute"]["half_rate_width"] = "wide";
  EXPECT_EQ(FieldOf(b), "cluster.compute.half_rate_width");
  b = Request();
  b["cluster"]["surprise"] = 1;
  EXPECT_EQ(FieldOf(b), "cluster.surprise");
  b = Request();
  b["options"] = {{"precision", "fp4"}};
  EXPECT_EQ(FieldOf(b), "options.precision");
  b = Request();
  b["options"] = {{"bucket_bytes", 1}};
  EXPECT_EQ(FieldOf(b), "options.bucket_bytes");
  b = Request();
  b["job"]["engine"]["data"]["dataset"] = "dataset:robo";
  EXPECT_EQ(FieldOf(b), "workload.tokens_per_sample");
  b["workload"] = {{"tokens_per_sample", 100000}};
  EXPECT_EQ(FieldOf(b), "workload.tokens_per_sample");
  b = Request();
  b.erase("cluster");
  EXPECT_EQ(FieldOf(b), "cluster");
}

TEST(PlanRequest, TextLimits) {
  api::SpecLimits limits;
  limits.max_body_bytes = 16;
  EXPECT_FALSE(ParsePlanRequestText(Request().dump(), limits).ok());
  EXPECT_FALSE(ParsePlanRequestText("{", api::SpecLimits{}).ok());
  EXPECT_TRUE(ParsePlanRequestText(Request().dump(), api::SpecLimits{}).ok());
}

}  // namespace
}  // namespace planner
