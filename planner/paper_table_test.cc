// The paper's data-parallel table (docs/planner.md): the documented cluster and job, planned at
// 256, 512 and 1,024 GPUs, give the figures the doc prints.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "planner/plan_request.h"

namespace planner {
namespace {

nlohmann::json Load(const std::string& path) {
  std::ifstream in(std::string(EMBODY_SOURCE_DIR) + "/" + path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

TEST(PaperTable, DocumentedFigures) {
  nlohmann::json body = Load("docs/plan/groot-n15-request.json");
  body["cluster"] = Load("docs/plan/paper-cluster.json");
  auto r = ParsePlanRequest(body, api::SpecLimits{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto plan = MakePlan(r->workload, r->cluster, r->options, r->gpus);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->sizes.size(), 3u);
  const double paper_hours[] = {2.55, 1.24, 0.73};
  for (size_t i = 0; i < 3; ++i) {
    const StepPrediction& s = plan->sizes[i];
    std::printf("%5d GPUs: step %.3f s (compute %.3f, all-reduce %.3f, exposed %.3f), epoch %.2f h "
                "(paper %.2f h), efficiency %.2f, %s, %.1f GiB/rank\n",
                s.ranks, s.step_s, s.compute_s, s.comm_s, s.exposed_comm_s, s.epoch_s / 3600,
                paper_hours[i], s.efficiency, BottleneckName(s.bottleneck),
                s.memory.total / (1ull << 30));
  }
  std::printf("efficient up to %d GPUs, below 50%% at %d\n", plan->last_efficient_ranks,
              plan->first_inefficient_ranks);
  // docs/planner.md's table.
  const double documented_hours[] = {2.55, 1.28, 0.66};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(plan->sizes[i].epoch_s / 3600, documented_hours[i], 0.005) << i;
  }
}

}  // namespace
}  // namespace planner
