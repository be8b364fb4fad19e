#include "cli/plan_format.h"

#include <gtest/gtest.h>

namespace cli {
namespace {

using nlohmann::json;

TEST(PlanFormatTest, GpuList) {
  EXPECT_EQ(*ParseGpuList("256,512,1024"), (std::vector<int>{256, 512, 1024}));
  EXPECT_EQ(*ParseGpuList("8"), (std::vector<int>{8}));
  for (const char* bad : {"", ",", "8,", "8,,16", "0", "-8", "8x", "99999999"}) {
    auto r = ParseGpuList(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().field(), "--gpus");
    }
  }
}

TEST(PlanFormatTest, BodyFromAJobSpecOrARequest) {
  const json spec = {{"name", "x"}, {"kind", "train"}};
  const json cluster = {{"ranks_per_node", 8}};
  auto b = PlanBody(spec, {8, 16}, cluster);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["job"], spec);
  EXPECT_EQ((*b)["gpus"], json({8, 16}));
  EXPECT_EQ((*b)["cluster"], cluster);
  // A request file keeps its own workload and options; flags replace its gpus.
  const json request = {{"job", spec}, {"gpus", {1}}, {"cluster", cluster},
                        {"workload", {{"epoch_samples", 10}}}};
  b = PlanBody(request, {4}, nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)["gpus"], json({4}));
  EXPECT_EQ((*b)["workload"]["epoch_samples"], 10);
  EXPECT_EQ(PlanBody(spec, {}, cluster).status().field(), "--gpus");
  EXPECT_EQ(PlanBody(spec, {8}, nullptr).status().field(), "--cluster");
  EXPECT_FALSE(PlanBody(json::array(), {8}, cluster).ok());
}

TEST(PlanFormatTest, Durations) {
  EXPECT_EQ(HumanDuration(0.25), "250 ms");
  EXPECT_EQ(HumanDuration(3.005), "3.00 s");
  EXPECT_EQ(HumanDuration(750.0), "12.5 min");
  EXPECT_EQ(HumanDuration(9180.0), "2.55 h");
  EXPECT_EQ(HumanDuration(nullptr), "-");
}

TEST(PlanFormatTest, Table) {
  // The server's reply read with the plan's codec, as the CLI reads it.
  const std::string rest = R"("samples_per_rank": 4, "compute_seconds": 1, "allreduce_seconds": 1,
    "exposed_allreduce_seconds": 0.5, "data_seconds": 0.1, "samples_per_s": 100,
    "memory": {"params": 1, "grads": 1, "optimizer": 2, "activations": 3})";
  auto plan = api::v1::ParsePlan(json::parse(R"({
    "cluster": "c", "allreduce": "ring", "precision": "fp32", "fp8_allreduce": false,
    "params": 1000, "flops_per_token": 6000, "tokens_per_sample": 88,
    "sizes": [
      {"gpus": 256, "nodes": 32, "step_seconds": 3.005, "epoch_seconds": 9180.0,
       "run_seconds": 9171.3, "tokens_per_s": 2180000, "efficiency": 0.99,
       "bottleneck": "compute", "memory_per_rank_bytes": 1.075e11, "fits_memory": false, )" +
                                             rest + R"(},
      {"gpus": 512, "nodes": 64, "step_seconds": 1.515, "epoch_seconds": null,
       "run_seconds": 4623.8, "tokens_per_s": 4330000, "efficiency": 0.98,
       "bottleneck": "communication", "memory_per_rank_bytes": 7.39e10, "fits_memory": true, )" +
                                             rest + R"(}],
    "efficient_up_to_gpus": 1024, "efficiency_below_half_at_gpus": 2048})"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(PlanTable(*plan),
            "GPUS  NODES  STEP    EPOCH   RUN       TOKENS/S  EFFICIENCY  BOTTLENECK     MEM/RANK\n"
            "256   32     3.00 s  2.55 h  2.55 h    2.18M     99%         compute        108GB "
            "(too big)\n"
            "512   64     1.51 s  -       77.1 min  4.33M     98%         communication  73.9GB\n"
            "efficiency vs one node stays >= 50% up to 1024 GPUs; below at 2048\n");
}

}  // namespace
}  // namespace cli
