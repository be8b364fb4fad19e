#include "controlplane/service/scheduler.h"

#include <gtest/gtest.h>

#include <set>

namespace controlplane::service {
namespace {

PendingJob Job(int64_t id, int nodes, int ranks_per_node = 1, int priority = 50,
               int64_t created_ms = 0, const std::string& slot_type = "cpu",
               int slots_per_rank = 1) {
  PendingJob j;
  j.job_id = id;
  j.priority = priority;
  j.created_ms = created_ms == 0 ? id : created_ms;
  j.resources.nodes = nodes;
  j.resources.ranks_per_node = ranks_per_node;
  j.resources.slot_type = slot_type;
  j.resources.slots_per_rank = slots_per_rank;
  return j;
}

NodeCapacity Node(int64_t id, int cpu, int gpu = 0) {
  return {id, "node-" + std::to_string(id), cpu, gpu};
}

TEST(SchedulerTest, SingleJobFits) {
  auto d = Schedule({Job(1, 1, 2)}, {Node(10, 4)});
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_TRUE(d.waiting.empty());
  const Placement& p = d.placements[0];
  EXPECT_EQ(p.job_id, 1);
  EXPECT_EQ(p.slot_type, "cpu");
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].node_id, 10);
  EXPECT_EQ(p.nodes[0].ranks, 2);
  EXPECT_EQ(p.nodes[0].slots, 2);
}

TEST(SchedulerTest, GangIsAllOrNothing) {
  // Needs 3 nodes with 2 slots; only 2 such nodes exist: nothing is allocated at all.
  auto d = Schedule({Job(1, 3, 2)}, {Node(1, 2), Node(2, 4), Node(3, 1)});
  EXPECT_TRUE(d.placements.empty());
  ASSERT_EQ(d.waiting.count(1), 1u);
  EXPECT_EQ(d.waiting[1], "waiting for 3 nodes with 2 free cpu slots each (2 fit)");
}

TEST(SchedulerTest, MultiNodeUsesDistinctNodes) {
  auto d = Schedule({Job(1, 3, 1)}, {Node(1, 8), Node(2, 1), Node(3, 1)});
  ASSERT_EQ(d.placements.size(), 1u);
  std::set<int64_t> ids;
  for (const auto& n : d.placements[0].nodes) ids.insert(n.node_id);
  EXPECT_EQ(ids, (std::set<int64_t>{1, 2, 3}));
}

TEST(SchedulerTest, HigherPriorityFirstThenOlder) {
  // One node with room for one job: priority wins over age, and age over id.
  auto d = Schedule({Job(1, 1, 4, 10, 100), Job(2, 1, 4, 90, 200), Job(3, 1, 4, 90, 150)},
                    {Node(1, 4)});
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job_id, 3);
  EXPECT_EQ(d.waiting.size(), 2u);
  EXPECT_EQ(d.waiting[2], "waiting for 1 nodes with 4 free cpu slots each (0 fit)");
}

TEST(SchedulerTest, EarlierPlacementsConsumeCapacity) {
  auto d = Schedule({Job(1, 1, 3), Job(2, 1, 3), Job(3, 1, 1)}, {Node(1, 4), Node(2, 3)});
  // Job 1 takes node 2 (best fit, 3 free), job 2 node 1 (4 free -> 1), job 3 the last slot.
  ASSERT_EQ(d.placements.size(), 3u);
  EXPECT_EQ(d.placements[0].nodes[0].node_id, 2);
  EXPECT_EQ(d.placements[1].nodes[0].node_id, 1);
  EXPECT_EQ(d.placements[2].nodes[0].node_id, 1);
}

TEST(SchedulerTest, SmallerJobBackfillsBehindOneThatDoesNotFit) {
  auto d = Schedule({Job(1, 2, 1, 90), Job(2, 1, 1, 10)}, {Node(1, 1)});
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(d.placements[0].job_id, 2);
  EXPECT_EQ(d.waiting[1], "waiting for 2 nodes with 1 free cpu slots each (1 fit)");
}

TEST(SchedulerTest, SlotTypesAreSeparate) {
  auto d = Schedule({Job(1, 1, 1, 50, 0, "gpu", 2), Job(2, 1, 4, 50, 0, "cpu")},
                    {Node(1, 4, 1), Node(2, 2, 2)});
  ASSERT_EQ(d.placements.size(), 2u);
  EXPECT_EQ(d.placements[0].job_id, 1);
  EXPECT_EQ(d.placements[0].slot_type, "gpu");
  EXPECT_EQ(d.placements[0].nodes[0].node_id, 2);
  EXPECT_EQ(d.placements[1].nodes[0].node_id, 1);
}

TEST(SchedulerTest, GpuJobOnCpuOnlyClusterWaits) {
  auto d = Schedule({Job(1, 1, 1, 50, 0, "gpu")}, {Node(1, 64)});
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(d.waiting[1], "waiting for 1 nodes with 1 free gpu slots each (0 fit)");
}

TEST(SchedulerTest, NothingFitsOnEmptyCluster) {
  auto d = Schedule({Job(1, 1), Job(2, 2)}, {});
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(d.waiting.size(), 2u);
}

TEST(SchedulerTest, FreeCapacitySubtractsAllocationsAndSkipsDownNodes) {
  NodeRecord up;
  up.id = 1;
  up.state = "UP";
  up.cpu_slots = 8;
  up.gpus = nlohmann::json::array({{{"index", 0}}, {{"index", 1}}});
  NodeRecord down = up;
  down.id = 2;
  down.state = "DOWN";
  AllocationRecord a;
  a.node_id = 1;
  a.slots = 3;
  a.slot_type = "cpu";
  AllocationRecord g = a;
  g.slots = 1;
  g.slot_type = "gpu";
  auto caps = FreeCapacity({up, down}, {a, g});
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_EQ(caps[0].free_cpu, 5);
  EXPECT_EQ(caps[0].free_gpu, 1);
  EXPECT_EQ(SlotsUsed(1, {a, g}), 4);
}

}  // namespace
}  // namespace controlplane::service
