// "Can this job ever run": the rules of job_fit.h one row each, and the node sizes it counts.
#include "controlplane/service/job_fit.h"

#include <gtest/gtest.h>

namespace controlplane::service {
namespace {

api::Resources Res(int nodes, int ranks_per_node, std::string slot_type = "cpu",
                   int slots_per_rank = 1) {
  api::Resources r;
  r.nodes = nodes;
  r.ranks_per_node = ranks_per_node;
  r.slot_type = std::move(slot_type);
  r.slots_per_rank = slots_per_rank;
  return r;
}

TEST(JobFitTest, EachRuleSaysWhatIsShort) {
  // Two 8-core nodes, one 4-core node with 2 GPUs.
  const NodeSizes nodes({{8, 0, 2}, {4, 2, 1}});
  TenantLimits quota;
  quota.nodes_per_job = 2;
  quota.slots = 12;
  struct Row {
    const char* what;
    api::Resources r;
    TenantLimits limits;
    std::optional<std::string> reason;  // nullopt: fits
    std::string field;
  };
  const std::vector<Row> rows = {
      {"fits on the two big nodes", Res(2, 8), {}, std::nullopt, ""},
      {"fits on any node", Res(3, 4), {}, std::nullopt, ""},
      {"GPUs on the one GPU node", Res(1, 1, "gpu", 2), {}, std::nullopt, ""},
      {"more big nodes than there are",
       Res(3, 8),
       {},
       "never fits: needs 3 nodes with 8 cpu slots each; the cluster has 2 such nodes of 3",
       "resources"},
      {"a node larger than any",
       Res(1, 2, "cpu", 5),
       {},
       "never fits: needs 1 nodes with 10 cpu slots each; the cluster has 0 such nodes of 3",
       "resources"},
      {"more GPUs per node than any has",
       Res(1, 3, "gpu"),
       {},
       "never fits: needs 1 nodes with 3 gpu slots each; the cluster has 0 such nodes of 3",
       "resources"},
      {"past nodes per job", Res(3, 1), quota,
       "never fits: asks for 3 nodes, the tenant's quota allows 2 nodes per job",
       "resources.nodes"},
      {"past the slot quota", Res(2, 8), quota,
       "never fits: needs 16 cpu slots, the tenant's quota allows 12", "resources"},
      {"within both quotas", Res(2, 6), quota, std::nullopt, ""},
      {"no running jobs allowed", Res(1, 1), TenantLimits{std::nullopt, 0, std::nullopt},
       "never fits: the tenant's quota allows no running jobs", "resources"},
      {"a running-jobs quota merely full is not decided here", Res(1, 1),
       TenantLimits{std::nullopt, 1, std::nullopt}, std::nullopt, ""},
      {"unknown slot type",
       Res(1, 1, "tpu"),
       {},
       "never fits: unknown slot type \"tpu\"",
       "resources.slot_type"},
      {"no slots", Res(0, 1), {}, "never fits: asks for no slots", "resources"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    auto got = WhyNeverFits(row.r, row.limits, nodes);
    ASSERT_EQ(got.has_value(), row.reason.has_value()) << (got ? got->reason : "fits");
    if (!got) continue;
    EXPECT_EQ(got->reason, *row.reason);
    EXPECT_EQ(got->field, row.field);
  }
}

TEST(JobFitTest, NoNodesNothingFits) {
  auto got = WhyNeverFits(Res(1, 1), {}, NodeSizes());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->reason,
            "never fits: needs 1 nodes with 1 cpu slots each; the cluster has 0 such nodes of 0");
}

TEST(JobFitTest, NodeSizesCountEveryNodeAtLeastThatLarge) {
  const NodeSizes sizes({{4, 0, 3}, {16, 8, 1}, {8, 2, 2}});
  EXPECT_EQ(sizes.nodes(), 6);
  EXPECT_EQ(sizes.CountAtLeast(kCpuSlots, 0), 6);
  EXPECT_EQ(sizes.CountAtLeast(kCpuSlots, 4), 6);
  EXPECT_EQ(sizes.CountAtLeast(kCpuSlots, 5), 3);
  EXPECT_EQ(sizes.CountAtLeast(kCpuSlots, 8), 3);
  EXPECT_EQ(sizes.CountAtLeast(kCpuSlots, 16), 1);
  EXPECT_EQ(sizes.CountAtLeast(kCpuSlots, 17), 0);
  EXPECT_EQ(sizes.CountAtLeast(kGpuSlots, 1), 3);
  EXPECT_EQ(sizes.CountAtLeast(kGpuSlots, 3), 1);
  EXPECT_EQ(sizes.CountAtLeast(-1, 1), 0);
}

TEST(JobFitTest, ShapesOfNodeRecordsGroupBySize) {
  auto node = [](int cpu, int gpus, const char* state) {
    NodeRecord n;
    n.cpu_slots = cpu;
    n.gpus = nlohmann::json::array();
    for (int i = 0; i < gpus; ++i) n.gpus.push_back({{"index", i}});
    n.state = state;
    return n;
  };
  // DOWN nodes count like UP ones; a gpus value that is not a list counts as none.
  NodeRecord odd = node(8, 0, "UP");
  odd.gpus = "broken";
  auto shapes = NodeShapesOf({node(8, 0, "UP"), node(8, 0, "DOWN"), node(4, 2, "UP"), odd});
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].cpu_slots, 4);
  EXPECT_EQ(shapes[0].gpus, 2);
  EXPECT_EQ(shapes[0].count, 1);
  EXPECT_EQ(shapes[1].cpu_slots, 8);
  EXPECT_EQ(shapes[1].gpus, 0);
  EXPECT_EQ(shapes[1].count, 3);
}

}  // namespace
}  // namespace controlplane::service
