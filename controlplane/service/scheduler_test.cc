// Table tests of the scheduling decision, one rule at a time: gang placement, order, fair share,
// quotas, never-fit detection, reservations and backfill. Preemption: scheduler_preempt_test.cc.
#include "controlplane/service/scheduler.h"

#include <gtest/gtest.h>

#include <set>

#include "controlplane/testing/scheduler_builders.h"

namespace controlplane::service {
namespace {

using testing::Job;
using testing::kNowMs;
using testing::Node;
using testing::Running;
using testing::Tenant;

ScheduleDecision Decide(std::vector<SchedNode> nodes, std::vector<PendingJob> pending,
                        std::vector<RunningJob> running = {}, std::vector<SchedTenant> tenants = {},
                        ScheduleOptions opts = {}) {
  ClusterSnapshot s;
  s.now_ms = kNowMs;
  s.nodes = std::move(nodes);
  s.pending = std::move(pending);
  s.running = std::move(running);
  s.tenants = std::move(tenants);
  return Schedule(s, opts);
}

std::vector<int64_t> PlacedIds(const ScheduleDecision& d) {
  std::vector<int64_t> ids;
  for (const Placement& p : d.placements) ids.push_back(p.job_id);
  return ids;
}

std::vector<int64_t> NodesOf(const ScheduleDecision& d, int64_t job) {
  for (const Placement& p : d.placements) {
    if (p.job_id != job) continue;
    std::vector<int64_t> ids;
    for (const NodeShare& n : p.nodes) ids.push_back(n.node_id);
    return ids;
  }
  return {};
}

TEST(ScheduleTest, SingleJobFits) {
  auto d = Decide({Node(10, 4)}, {Job(1, {.ranks_per_node = 2})});
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

TEST(ScheduleTest, GangIsAllOrNothing) {
  // Three nodes could hold 2 slots each, but one holds a job without a time limit: nothing at
  // all is allocated, and no reservation can be made.
  std::vector<SchedNode> nodes{Node(1, 2), Node(2, 2), Node(3, 2)};
  auto r = Running(nodes, 100, {3}, 1);
  auto d = Decide(nodes, {Job(1, {.nodes = 3, .ranks_per_node = 2})}, {r});
  EXPECT_TRUE(d.placements.empty());
  EXPECT_TRUE(d.reservations.empty());
  EXPECT_EQ(d.waiting[1],
            "waiting for 3 nodes with 2 free cpu slots each (2 fit); no reservation: too few "
            "nodes are expected to free up (jobs without a time limit, or reserved for jobs "
            "ahead)");
}

TEST(ScheduleTest, MultiNodeUsesDistinctNodesFullestFirst) {
  auto d = Decide({Node(1, 8), Node(2, 1), Node(3, 1)}, {Job(1, {.nodes = 3})});
  ASSERT_EQ(d.placements.size(), 1u);
  EXPECT_EQ(NodesOf(d, 1), (std::vector<int64_t>{2, 3, 1}));  // head: the fullest, by id
}

TEST(ScheduleTest, PriorityThenAgeThenId) {
  auto d = Decide({Node(1, 4)}, {Job(1, {.ranks_per_node = 4, .priority = 10, .submit_ms = 100}),
                                 Job(2, {.ranks_per_node = 4, .priority = 90, .submit_ms = 200}),
                                 Job(4, {.ranks_per_node = 4, .priority = 90, .submit_ms = 150}),
                                 Job(3, {.ranks_per_node = 4, .priority = 90, .submit_ms = 150})});
  EXPECT_EQ(d.order, (std::vector<int64_t>{3, 4, 2, 1}));
  EXPECT_EQ(PlacedIds(d), (std::vector<int64_t>{3}));
  EXPECT_EQ(d.waiting.size(), 3u);
}

TEST(ScheduleTest, BestFitKeepsLargeHoles) {
  auto d = Decide({Node(1, 4), Node(2, 3)},
                  {Job(1, {.ranks_per_node = 3}), Job(2, {.ranks_per_node = 3}), Job(3)});
  EXPECT_EQ(NodesOf(d, 1), (std::vector<int64_t>{2}));
  EXPECT_EQ(NodesOf(d, 2), (std::vector<int64_t>{1}));
  EXPECT_EQ(NodesOf(d, 3), (std::vector<int64_t>{1}));
}

TEST(ScheduleTest, SlotTypesAreSeparate) {
  auto d = Decide({Node(1, 4, 1), Node(2, 2, 2)},
                  {Job(1, {.slots_per_rank = 2, .slot_type = "gpu"}), Job(2, {.ranks_per_node = 4})});
  ASSERT_EQ(d.placements.size(), 2u);
  EXPECT_EQ(d.placements[0].slot_type, "gpu");
  EXPECT_EQ(NodesOf(d, 1), (std::vector<int64_t>{2}));
  EXPECT_EQ(NodesOf(d, 2), (std::vector<int64_t>{1}));
}

TEST(ScheduleTest, DrainingNodesTakeNoNewJobsButCountForNeverFits) {
  SchedNode draining = Node(1, 4);
  draining.draining = true;
  auto d = Decide({draining, Node(2, 4)}, {Job(1, {.ranks_per_node = 4}),
                                           Job(2, {.ranks_per_node = 4}),
                                           Job(3, {.nodes = 2, .ranks_per_node = 4})});
  EXPECT_EQ(NodesOf(d, 1), (std::vector<int64_t>{2}));
  EXPECT_EQ(d.waiting[2].rfind("waiting for 1 nodes with 4 free cpu slots each (0 fit)", 0), 0u);
  EXPECT_EQ(d.waiting[3].rfind("waiting for 2 nodes", 0), 0u);
}

TEST(ScheduleTest, LowerFairShareGoesFirstAtEqualPriority) {
  SchedTenant busy = Tenant(1);
  busy.usage[kCpuSlots] = 1e6;  // a long history of use
  auto d = Decide({Node(1, 1)}, {Job(1, {.tenant = 1}), Job(2, {.tenant = 2})}, {},
                  {busy, Tenant(2)});
  EXPECT_EQ(PlacedIds(d), (std::vector<int64_t>{2}));
}

TEST(ScheduleTest, WhatTenantsHoldNowCountsInTheirShare) {
  std::vector<SchedNode> nodes{Node(1, 2), Node(2, 2)};
  auto held = Running(nodes, 100, {1}, 2, 0, 0, 0, /*tenant=*/1);
  auto d = Decide(nodes, {Job(1, {.tenant = 1}), Job(2, {.tenant = 2})}, {held});
  EXPECT_EQ(d.order, (std::vector<int64_t>{2, 1}));
}

TEST(ScheduleTest, WeightsSplitTheClusterWithinOneCycle) {
  std::vector<SchedNode> nodes;
  for (int i = 1; i <= 8; ++i) nodes.push_back(Node(i, 1));
  std::vector<PendingJob> jobs;
  for (int i = 1; i <= 8; ++i) {
    jobs.push_back(Job(i, {.tenant = 1}));
    jobs.push_back(Job(10 + i, {.tenant = 2}));
  }
  auto d = Decide(nodes, jobs, {}, {Tenant(1, 1), Tenant(2, 3)});
  int per_tenant[3] = {0, 0, 0};
  for (int64_t id : PlacedIds(d)) per_tenant[id > 10 ? 2 : 1] += 1;
  EXPECT_EQ(per_tenant[1], 2);
  EXPECT_EQ(per_tenant[2], 6);
}

TEST(ScheduleTest, PriorityBeatsFairShare) {
  SchedTenant busy = Tenant(1);
  busy.usage[kCpuSlots] = 1e6;
  auto d = Decide({Node(1, 1)}, {Job(1, {.tenant = 1, .priority = 60}),
                                 Job(2, {.tenant = 2, .priority = 50})},
                  {}, {busy, Tenant(2)});
  EXPECT_EQ(PlacedIds(d), (std::vector<int64_t>{1}));
}

TEST(ScheduleTest, SlotQuotaHoldsWithinTheCycle) {
  SchedTenant t = Tenant(1);
  t.limits.slots = 8;
  auto d = Decide({Node(1, 16)}, {Job(1, {.ranks_per_node = 4}), Job(2, {.ranks_per_node = 4}),
                                  Job(3, {.ranks_per_node = 4})},
                  {}, {t});
  EXPECT_EQ(PlacedIds(d), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d.waiting[3], "tenant quota: slots 8/8");
  EXPECT_TRUE(d.reservations.empty());  // a job held back by its quota reserves nothing
}

TEST(ScheduleTest, SlotQuotaSaysWhatTheJobNeeds) {
  SchedTenant t = Tenant(1);
  t.limits.slots = 8;
  t.slots_in_use = 6;
  auto d = Decide({Node(1, 16)}, {Job(1, {.ranks_per_node = 4})}, {}, {t});
  EXPECT_EQ(d.waiting[1], "tenant quota: slots 6/8, the job needs 4");
}

TEST(ScheduleTest, RunningJobQuota) {
  SchedTenant t = Tenant(1);
  t.limits.running_jobs = 2;
  t.running_jobs = 1;
  auto d = Decide({Node(1, 16)}, {Job(1), Job(2)}, {}, {t, Tenant(2)});
  EXPECT_EQ(PlacedIds(d), (std::vector<int64_t>{1}));
  EXPECT_EQ(d.waiting[2], "tenant quota: running jobs 2/2");
}

TEST(ScheduleTest, NeverFitsSaysWhatIsShort) {
  SchedTenant t = Tenant(1);
  t.limits.nodes_per_job = 2;
  t.limits.slots = 6;
  auto d = Decide({Node(1, 4), Node(2, 4)},
                  {Job(1, {.nodes = 3}), Job(2, {.nodes = 2, .ranks_per_node = 4}),
                   Job(3, {.tenant = 2, .nodes = 3}), Job(4, {.tenant = 2, .ranks_per_node = 8}),
                   Job(5, {.tenant = 2, .slot_type = "gpu"}),
                   Job(6, {.tenant = 2, .slot_type = "tpu"})},
                  {}, {t});
  EXPECT_TRUE(d.placements.empty());
  // The wording is job_fit.h's, the same as a submission's 422 (job_fit_test.cc has the rules).
  EXPECT_EQ(d.waiting[1],
            "never fits: asks for 3 nodes, the tenant's quota allows 2 nodes per job");
  EXPECT_EQ(d.waiting[2], "never fits: needs 8 cpu slots, the tenant's quota allows 6");
  EXPECT_EQ(d.waiting[3],
            "never fits: needs 3 nodes with 1 cpu slots each; the cluster has 2 such nodes of 2");
  EXPECT_EQ(d.waiting[4],
            "never fits: needs 1 nodes with 8 cpu slots each; the cluster has 0 such nodes of 2");
  EXPECT_EQ(d.waiting[5],
            "never fits: needs 1 nodes with 1 gpu slots each; the cluster has 0 such nodes of 2");
  EXPECT_EQ(d.waiting[6], "never fits: unknown slot type \"tpu\"");
}

// "Never fits" is decided on every registered node, as at submit: a node that is DOWN (absent
// from the snapshot's UP nodes) is expected back, so a job only it could hold waits for it.
TEST(ScheduleTest, NeverFitsCountsRegisteredNodesNotOnlyUpOnes) {
  SchedNode busy = Node(1, 8);
  busy.free_cpu = 0;  // in use now: still could fit later
  busy.draining = true;
  ClusterSnapshot s;
  s.now_ms = kNowMs;
  s.nodes = {busy};
  s.pending = {Job(1, {.ranks_per_node = 8}), Job(2, {.nodes = 2, .ranks_per_node = 8}),
               Job(3, {.ranks_per_node = 16})};
  auto d = Schedule(s, {});
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(d.waiting[1].rfind("waiting for", 0), 0u) << d.waiting[1];
  EXPECT_EQ(d.waiting[2],
            "never fits: needs 2 nodes with 8 cpu slots each; the cluster has 1 such nodes of 1");
  // A DOWN node of 16 slots and a DOWN node of 8: the 2-node and 16-slot jobs wait instead.
  s.registered = std::vector<NodeShape>{{8, 0, 2}, {16, 0, 1}};
  d = Schedule(s, {});
  EXPECT_TRUE(d.placements.empty());
  for (int64_t id : {1, 2, 3}) {
    EXPECT_EQ(d.waiting[id].rfind("waiting for", 0), 0u) << id << ": " << d.waiting[id];
  }
  EXPECT_EQ(RegisteredSizes(s).nodes(), 3);
}

// The case that motivated reservations: a 3-node job at priority 50 behind a stream of 1-node
// jobs at priority 0. It reserves the nodes that free up soonest; the small jobs start now only
// where they end before the reservation starts.
TEST(ScheduleTest, ReservationForTheFirstJobThatCannotStartAndBackfillAroundIt) {
  std::vector<SchedNode> nodes{Node(1, 1), Node(2, 1), Node(3, 1), Node(4, 1)};
  std::vector<RunningJob> running{Running(nodes, 101, {1}, 1, 0, 0, 100),
                                  Running(nodes, 102, {2}, 1, 0, 0, 200),
                                  Running(nodes, 103, {3}, 1, 0, 0, 300)};
  ScheduleOptions one;
  one.max_reservations = 1;
  auto d = Decide(nodes,
                  {Job(1, {.nodes = 3, .priority = 50}), Job(2, {.priority = 0}),
                   Job(3, {.priority = 0, .limit_s = 250}), Job(4, {.priority = 0, .limit_s = 150})},
                  running, {}, one);
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].job_id, 1);
  EXPECT_EQ(d.reservations[0].node_ids, (std::vector<int64_t>{4, 1, 2}));
  EXPECT_EQ(d.reservations[0].start_ms, kNowMs + 200'000);
  EXPECT_EQ(d.waiting[1].rfind("waiting for 3 nodes with 1 free cpu slots each (1 fit); reserved 3 "
                               "nodes from ", 0),
            0u);
  EXPECT_EQ(d.waiting[2], "waiting for 1 nodes with 1 free cpu slots each (1 fit, but a job "
                          "without a time limit there would delay reserved jobs)");
  EXPECT_EQ(d.waiting[3], "waiting for 1 nodes with 1 free cpu slots each (1 fit, but the job "
                          "would run into the start of reserved jobs there)");
  EXPECT_EQ(PlacedIds(d), (std::vector<int64_t>{4}));  // ends before the reservation starts
  EXPECT_EQ(NodesOf(d, 4), (std::vector<int64_t>{4}));
}

TEST(ScheduleTest, JobsWithoutLimitUseRoomTheReservationDoesNotNeed) {
  std::vector<SchedNode> nodes{Node(1, 4), Node(2, 2)};
  std::vector<RunningJob> running{Running(nodes, 101, {2}, 2, 0, 0, 100)};
  auto d = Decide(nodes,
                  {Job(1, {.nodes = 2, .ranks_per_node = 2}),
                   Job(2, {.ranks_per_node = 2, .priority = 0}), Job(3, {.priority = 0})},
                  running);
  ASSERT_GE(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].node_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(NodesOf(d, 2), (std::vector<int64_t>{1}));  // node 1 has 4: 2 reserved, 2 spare
  EXPECT_TRUE(d.waiting.count(3));                      // and nothing more
}

TEST(ScheduleTest, SeveralReservationsOnDifferentNodes) {
  std::vector<SchedNode> nodes{Node(1, 1), Node(2, 1), Node(3, 1), Node(4, 1)};
  std::vector<RunningJob> running{
      Running(nodes, 101, {1}, 1, 0, 0, 100), Running(nodes, 102, {2}, 1, 0, 0, 200),
      Running(nodes, 103, {3}, 1, 0, 0, 300), Running(nodes, 104, {4}, 1, 0, 0, 400)};
  std::vector<PendingJob> jobs{Job(1, {.nodes = 2}), Job(2, {.nodes = 2})};
  auto d = Decide(nodes, jobs, running);
  ASSERT_EQ(d.reservations.size(), 2u);
  EXPECT_EQ(d.reservations[0].node_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d.reservations[0].start_ms, kNowMs + 200'000);
  EXPECT_EQ(d.reservations[1].node_ids, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(d.reservations[1].start_ms, kNowMs + 400'000);

  ScheduleOptions one;
  one.max_reservations = 1;
  d = Decide(nodes, jobs, running, {}, one);
  EXPECT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.waiting[2], "waiting for 2 nodes with 1 free cpu slots each (0 fit)");
}

TEST(ScheduleTest, OverdueJobsAreExpectedToEndAtOnce) {
  std::vector<SchedNode> nodes{Node(1, 1)};
  std::vector<RunningJob> running{Running(nodes, 101, {1}, 1, 0, /*age_s=*/500, /*limit_s=*/100)};
  auto d = Decide(nodes, {Job(1)}, running);
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].start_ms, kNowMs + 1);
}

}  // namespace
}  // namespace controlplane::service
