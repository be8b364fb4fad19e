// Preemption: who is chosen, who is spared, and what the cycle does with the room it makes.
#include <gtest/gtest.h>

#include "controlplane/service/scheduler.h"
#include "controlplane/testing/scheduler_builders.h"

namespace controlplane::service {
namespace {

using testing::Job;
using testing::kNowMs;
using testing::Node;
using testing::Running;

ScheduleOptions Preempting(int min_priority = 80) {
  ScheduleOptions o;
  o.preempt_min_priority = min_priority;
  o.preempt_grace_ms = 30'000;
  return o;
}

ScheduleDecision DecidePreempting(std::vector<SchedNode> nodes, std::vector<PendingJob> pending,
                                  std::vector<RunningJob> running,
                                  ScheduleOptions opts = Preempting()) {
  ClusterSnapshot s;
  s.now_ms = kNowMs;
  s.nodes = std::move(nodes);
  s.pending = std::move(pending);
  s.running = std::move(running);
  return Schedule(s, opts);
}

TEST(PreemptTest, LowestPriorityThenYoungestAndOnlyThoseNeeded) {
  std::vector<SchedNode> nodes{Node(1, 4), Node(2, 4)};
  std::vector<RunningJob> running{
      Running(nodes, 11, {1}, 2, /*priority=*/10, /*age_s=*/100),
      Running(nodes, 12, {1}, 2, 0, 50),
      Running(nodes, 13, {2}, 2, 0, 200),
      Running(nodes, 14, {2}, 2, 0, 10),
  };
  // Considered 14, 12, 13 (priority 0, youngest first), then 11. 14 and 13 empty node 2; 12
  // was taken on the way but is not needed, so it is spared.
  auto d = DecidePreempting(nodes, {Job(1, {.ranks_per_node = 4, .priority = 90})}, running);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job_id, 1);
  EXPECT_EQ(d.preemptions[0].victims, (std::vector<int64_t>{13, 14}));
  EXPECT_EQ(d.waiting[1], "preempting jobs 13, 14");
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].node_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(d.reservations[0].start_ms, kNowMs + 30'000);
}

TEST(PreemptTest, LowerPriorityGoesBeforeYounger) {
  std::vector<SchedNode> nodes{Node(1, 4)};
  std::vector<RunningJob> running{Running(nodes, 21, {1}, 2, 10, 10),
                                  Running(nodes, 22, {1}, 2, 5, 1000)};
  auto d = DecidePreempting(nodes, {Job(1, {.ranks_per_node = 2, .priority = 90})}, running);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victims, (std::vector<int64_t>{22}));
}

TEST(PreemptTest, YoungestFirstAmongEqualPriorities) {
  std::vector<SchedNode> nodes{Node(1, 4)};
  std::vector<RunningJob> running{Running(nodes, 31, {1}, 2, 0, 100),
                                  Running(nodes, 32, {1}, 2, 0, 10)};
  auto d = DecidePreempting(nodes, {Job(1, {.ranks_per_node = 2, .priority = 90})}, running);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victims, (std::vector<int64_t>{32}));
}

TEST(PreemptTest, OnlyStrictlyLowerPriority) {
  std::vector<SchedNode> nodes{Node(1, 2)};
  std::vector<RunningJob> running{Running(nodes, 41, {1}, 2, 90)};
  auto d = DecidePreempting(nodes, {Job(1, {.ranks_per_node = 2, .priority = 90})}, running);
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(PreemptTest, OffUnlessAskedForAndOnlyFromTheMinimumPriority) {
  std::vector<SchedNode> nodes{Node(1, 2)};
  std::vector<RunningJob> running{Running(nodes, 41, {1}, 2, 0)};
  std::vector<PendingJob> job{Job(1, {.ranks_per_node = 2, .priority = 79})};
  EXPECT_TRUE(DecidePreempting(nodes, job, running, ScheduleOptions{}).preemptions.empty());
  EXPECT_TRUE(DecidePreempting(nodes, job, running).preemptions.empty());
  job[0].priority = 80;
  EXPECT_EQ(DecidePreempting(nodes, job, running).preemptions.size(), 1u);
}

TEST(PreemptTest, VictimsAreNotPlacedOverInTheSameCycle) {
  std::vector<SchedNode> nodes{Node(1, 2)};
  std::vector<RunningJob> running{Running(nodes, 51, {1}, 2, 0)};
  auto d = DecidePreempting(nodes,
                            {Job(1, {.ranks_per_node = 2, .priority = 90}), Job(2, {.priority = 0}),
                             Job(3, {.priority = 0, .limit_s = 10})},
                            running);
  EXPECT_EQ(d.preemptions.size(), 1u);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(d.waiting[2].rfind("waiting for 1 nodes with 1 free cpu slots each (0 fit)", 0), 0u);
  EXPECT_EQ(d.waiting[3].rfind("waiting for 1 nodes with 1 free cpu slots each (0 fit)", 0), 0u);
}

TEST(PreemptTest, JobsAlreadyLeavingAreNotPreemptedAgain) {
  std::vector<SchedNode> nodes{Node(1, 2), Node(2, 2)};
  std::vector<RunningJob> running{Running(nodes, 61, {1}, 2, 0, 10),
                                  Running(nodes, 62, {2}, 2, 0, 20)};
  running[0].preempting = true;  // told to leave by the previous cycle
  auto d = DecidePreempting(nodes, {Job(1, {.ranks_per_node = 2, .priority = 90})}, running);
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(d.waiting[1], "preempting jobs 61");
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].node_ids, (std::vector<int64_t>{1}));
}

TEST(PreemptTest, NothingOnDrainingNodes) {
  std::vector<SchedNode> nodes{Node(1, 2), Node(2, 2)};
  nodes[0].draining = true;
  std::vector<RunningJob> running{Running(nodes, 71, {1}, 2, 0, 1),
                                  Running(nodes, 72, {2}, 2, 5, 100)};
  auto d = DecidePreempting(nodes, {Job(1, {.ranks_per_node = 2, .priority = 90})}, running);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victims, (std::vector<int64_t>{72}));
}

TEST(PreemptTest, NoVictimsWhenEvenAllOfThemWouldNotMakeRoom) {
  std::vector<SchedNode> nodes{Node(1, 2), Node(2, 2)};
  std::vector<RunningJob> running{Running(nodes, 81, {1}, 2, 0), Running(nodes, 82, {2}, 2, 95)};
  auto d =
      DecidePreempting(nodes, {Job(1, {.nodes = 2, .ranks_per_node = 2, .priority = 90})}, running);
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_TRUE(d.reservations.empty());
}

TEST(PreemptTest, TheQuotaStillApplies) {
  std::vector<SchedNode> nodes{Node(1, 2)};
  std::vector<RunningJob> running{Running(nodes, 91, {1}, 2, 0, 0, 0, /*tenant=*/2)};
  SchedTenant t = testing::Tenant(1);
  t.limits.running_jobs = 0;
  ClusterSnapshot s;
  s.now_ms = kNowMs;
  s.nodes = nodes;
  s.running = running;
  s.tenants = {t};
  s.pending = {Job(1, {.ranks_per_node = 2, .priority = 90})};
  auto d = Schedule(s, Preempting());
  EXPECT_TRUE(d.preemptions.empty());
  // A quota of no running jobs at all is "never fits" (job_fit.h), as at submit.
  EXPECT_EQ(d.waiting[1], "never fits: the tenant's quota allows no running jobs");
}

// Across tenants, a high priority preempts only a tenant above its fair share: here tenant 2
// holds the whole node and tenant 1 nothing, so tenant 2's share (1.0) is above tenant 1's once
// its job runs (0.5), and the reason says so.
TEST(PreemptTest, AnotherTenantsJobsOnlyWhileThatTenantIsAboveItsShare) {
  std::vector<SchedNode> nodes{Node(1, 4)};
  std::vector<RunningJob> running{Running(nodes, 31, {1}, 2, 10, 100, 0, /*tenant=*/2),
                                  Running(nodes, 32, {1}, 2, 10, 50, 0, /*tenant=*/2)};
  auto d = DecidePreempting(nodes, {Job(1, {.tenant = 1, .ranks_per_node = 2, .priority = 90})},
                            running);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victims, (std::vector<int64_t>{32}));
  EXPECT_NE(d.preemptions[0].why.at(32).find("tenant 2 above its fair share (share 1.000, "
                                               "tenant 1's 0.500 after)"),
            std::string::npos)
      << d.preemptions[0].why.at(32);
}

// Tenant 1 already holds half the node; with its job it would hold it all (1.0), more than
// tenant 2's half (0.5): tenant 2's job is never the victim, whatever the priority. Tenant 1's
// own lower-priority job is: within a tenant, priority decides.
TEST(PreemptTest, APriorityNeverBuysMoreThanTheWeightGives) {
  std::vector<SchedNode> nodes{Node(1, 4)};
  std::vector<RunningJob> running{Running(nodes, 41, {1}, 2, 10, 100, 0, /*tenant=*/1),
                                  Running(nodes, 42, {1}, 2, 10, 50, 0, /*tenant=*/2)};
  auto d = DecidePreempting(nodes, {Job(1, {.tenant = 1, .ranks_per_node = 2, .priority = 100})},
                            running);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victims, (std::vector<int64_t>{41}));
  EXPECT_EQ(d.preemptions[0].why.at(41), "priority 10 below 100, same tenant");
  // Its own job at the same priority: nothing to preempt, tenant 2's job stays.
  std::vector<SchedNode> nodes2{Node(1, 4)};
  std::vector<RunningJob> own{Running(nodes2, 41, {1}, 2, 100, 100, 0, /*tenant=*/1),
                              Running(nodes2, 42, {1}, 2, 10, 50, 0, /*tenant=*/2)};
  d = DecidePreempting(nodes2, {Job(1, {.tenant = 1, .ranks_per_node = 2, .priority = 100})}, own);
  EXPECT_TRUE(d.preemptions.empty());
}

// A preemption that failed for one tenant says nothing of another's job of the same shape: whose
// jobs a job may preempt depends on its tenant's share. Tenant 2's job finds no victim (its own
// job outranks it, tenant 1 is below tenant 2's share after); tenant 3's, considered after it at a
// lower priority, may take tenant 1's job.
TEST(PreemptTest, AFailureOfOneTenantDoesNotStopAnother) {
  std::vector<SchedNode> nodes{Node(1, 4)};
  std::vector<RunningJob> running{Running(nodes, 41, {1}, 2, 10, 100, 0, /*tenant=*/1),
                                  Running(nodes, 42, {1}, 2, 95, 50, 0, /*tenant=*/2)};
  auto d = DecidePreempting(nodes,
                            {Job(1, {.tenant = 2, .ranks_per_node = 2, .priority = 90}),
                             Job(2, {.tenant = 3, .ranks_per_node = 2, .priority = 89})},
                            running);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job_id, 2);
  EXPECT_EQ(d.preemptions[0].victims, (std::vector<int64_t>{41}));
}

}  // namespace
}  // namespace controlplane::service
