// Fair-share state (decay, accrual, dominant share) and a simulated hour of two tenants with
// deep backlogs sharing a cluster through the scheduler.
#include "controlplane/service/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "controlplane/service/scheduler.h"
#include "controlplane/testing/scheduler_builders.h"

namespace controlplane::service {
namespace {

TEST(FairShareTest, UsageHalvesEveryHalfLife) {
  const SlotSeconds u = AccrueUsage({100, 40}, {0, 0}, 600, 600);
  EXPECT_DOUBLE_EQ(u[kCpuSlots], 50);
  EXPECT_DOUBLE_EQ(u[kGpuSlots], 20);
}

TEST(FairShareTest, HoldingAddsTheDecayedIntegral) {
  // Short intervals approach plain slot-seconds; split intervals add up to one long one.
  EXPECT_NEAR(AccrueUsage({0, 0}, {4, 0}, 1, 86400)[kCpuSlots], 4.0, 1e-3);
  const SlotSeconds once = AccrueUsage({10, 0}, {3, 2}, 900, 600);
  const SlotSeconds twice = AccrueUsage(AccrueUsage({10, 0}, {3, 2}, 300, 600), {3, 2}, 600, 600);
  EXPECT_NEAR(once[kCpuSlots], twice[kCpuSlots], 1e-9);
  EXPECT_NEAR(once[kGpuSlots], twice[kGpuSlots], 1e-9);
}

TEST(FairShareTest, NoHalfLifeNoHistory) {
  EXPECT_EQ(AccrueUsage({100, 1}, {5, 5}, 60, 0), (SlotSeconds{0, 0}));
  EXPECT_EQ(AccrueUsage({100, 1}, {5, 5}, 0, 600), (SlotSeconds{100, 1}));
}

TEST(FairShareTest, AccruesEveryTenantSeenInEither) {
  auto out = AccrueUsageByTenant({{1, SlotSeconds{100, 0}}}, {{2, SlotCounts{1, 0}}}, 600, 600);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_DOUBLE_EQ(out[1][kCpuSlots], 50);
  EXPECT_GT(out[2][kCpuSlots], 0);
}

TEST(FairShareTest, DominantShareTakesTheScarcestTypeAndDividesByWeight) {
  // No history: shares of what is held now. 8 of 64 cpu slots, 2 of 4 gpus: the gpus dominate.
  const SlotSeconds fresh = ClusterUsage({{{0, 0}, {8, 2}}}, {64, 4});
  EXPECT_DOUBLE_EQ(DominantShare({0, 0}, {8, 2}, fresh, 1), 0.5);
  EXPECT_DOUBLE_EQ(DominantShare({0, 0}, {8, 2}, fresh, 4), 0.125);
  const SlotSeconds no_gpus = ClusterUsage({{{0, 0}, {8, 2}}}, {64, 0});
  EXPECT_DOUBLE_EQ(DominantShare({0, 0}, {8, 2}, no_gpus, 1), 0.125);  // no gpus: ignored
  EXPECT_GT(DominantShare({0, 0}, {1, 0}, fresh, 0), 1e6);             // weight 0: last
}

TEST(FairShareTest, HistoryIsMeasuredAgainstTheClustersHistory) {
  // Two tenants each holding one of two slots now; B has had three times A's history. With
  // weights 1 (A) and 3 (B) their histories are exactly in proportion: equal shares.
  const std::vector<TenantUsage> tenants = {{{3000, 0}, {1, 0}}, {{9000, 0}, {1, 0}}};
  const SlotSeconds cluster = ClusterUsage(tenants, {2, 0});
  EXPECT_DOUBLE_EQ(cluster[kCpuSlots], 3000 + 9000 + 2 * kHeldNowSeconds);
  EXPECT_NEAR(DominantShare({3000, 0}, {0, 0}, cluster, 1),
              DominantShare({9000, 0}, {0, 0}, cluster, 3), 1e-12);
  // History outweighs what is held now, whatever the half-life it was decayed with: B, behind
  // its weight, goes before A even while holding both slots, A none.
  EXPECT_LT(DominantShare({6000, 0}, {2, 0}, cluster, 3),
            DominantShare({6000, 0}, {0, 0}, cluster, 1));
}

// Two tenants of weights 1 (tenant 1) and 3 (tenant 2) with deep backlogs of equal jobs share
// `nodes` nodes of `per_node` slots from an empty history: a cycle every 10 s, jobs end after
// their durations, fair-share state accrued each cycle. Returns the heavier tenant's part of the
// slot-seconds used up to `horizon_s`, and checks the cluster stayed busy (90% of its slots).
struct Simulation {
  int nodes = 1;
  int per_node = 1;
  int job_slots = 1;
  int min_s = 60, max_s = 180;  // job durations, uniform
  double half_life_s = 86400;
  int64_t horizon_s = 1200;
  uint64_t seed = 1;
};

double HeavierPart(const Simulation& sim) {
  constexpr int64_t kCycleS = 10;
  std::vector<SchedNode> nodes;
  for (int i = 1; i <= sim.nodes; ++i) nodes.push_back(testing::Node(i, sim.per_node));
  std::map<int64_t, int> node_at;
  for (size_t i = 0; i < nodes.size(); ++i) node_at[nodes[i].id] = static_cast<int>(i);
  struct Live {
    RunningJob job;
    int64_t end_s;
  };
  std::vector<Live> live;
  std::map<int64_t, SlotSeconds> usage;
  std::map<int64_t, double> slot_seconds;
  std::mt19937_64 rng(sim.seed);
  std::uniform_int_distribution<int> duration(sim.min_s, sim.max_s);
  const size_t backlog_size = static_cast<size_t>(sim.nodes * sim.per_node / sim.job_slots) + 4;
  int64_t next_id = 1;
  std::map<int64_t, std::vector<PendingJob>> backlog;
  ScheduleOptions opts;
  opts.fair_share_half_life_seconds = sim.half_life_s;
  for (int64_t t = 0; t < sim.horizon_s; t += kCycleS) {
    // Jobs that ended since the last cycle give their slots back.
    std::erase_if(live, [&](const Live& l) {
      if (l.end_s > t) return false;
      nodes[node_at[l.job.nodes[0].node_id]].free_cpu += l.job.nodes[0].slots;
      return true;
    });
    for (int64_t tenant : {1, 2}) {
      while (backlog[tenant].size() < backlog_size) {
        const int64_t id = next_id++;
        backlog[tenant].push_back(testing::Job(id, {.tenant = tenant,
                                                    .slots_per_rank = sim.job_slots,
                                                    .limit_s = duration(rng),
                                                    .submit_ms = id}));
      }
    }
    ClusterSnapshot s;
    s.now_ms = t * 1000;
    s.nodes = nodes;
    s.tenants = {testing::Tenant(1, 1), testing::Tenant(2, 3)};
    for (SchedTenant& st : s.tenants) st.usage = usage[st.id];
    for (const Live& l : live) s.running.push_back(l.job);
    for (auto& [tenant, jobs] : backlog)
      s.pending.insert(s.pending.end(), jobs.begin(), jobs.end());
    const ScheduleDecision d = Schedule(s, opts);
    std::map<int64_t, std::pair<int64_t, const PendingJob*>> by_id;
    for (auto& [tenant, q] : backlog) {
      for (const PendingJob& j : q) by_id[j.job_id] = {tenant, &j};
    }
    std::set<int64_t> placed;
    for (const Placement& p : d.placements) {
      auto [tenant, job] = by_id.at(p.job_id);
      RunningJob r;
      r.job_id = job->job_id;
      r.tenant_id = tenant;
      r.start_ms = s.now_ms;
      r.time_limit_seconds = job->time_limit_seconds;
      r.slot_type = "cpu";
      r.nodes = p.nodes;
      nodes[node_at[p.nodes[0].node_id]].free_cpu -= p.nodes[0].slots;
      const int64_t end = t + job->time_limit_seconds;
      slot_seconds[tenant] +=
          p.nodes[0].slots * static_cast<double>(std::min(end, sim.horizon_s) - t);
      live.push_back({r, end});
      placed.insert(p.job_id);
    }
    for (auto& [tenant, q] : backlog) {
      std::erase_if(q, [&](const PendingJob& j) { return placed.count(j.job_id) > 0; });
    }
    // What each tenant held over the coming interval, into its history.
    std::map<int64_t, SlotCounts> held;
    for (const Live& l : live) held[l.job.tenant_id][kCpuSlots] += l.job.nodes[0].slots;
    usage = AccrueUsageByTenant(usage, held, kCycleS, sim.half_life_s);
  }
  const double total = slot_seconds[1] + slot_seconds[2];
  EXPECT_GT(total, 0.9 * sim.nodes * sim.per_node * static_cast<double>(sim.horizon_s))
      << "the cluster did not stay busy";
  return total > 0 ? slot_seconds[2] / total : 0;
}

// `slots` one-slot nodes' worth of one-slot jobs (60-180 s, mean L = 120 s) with the default
// half-life of a day, over the first 10 job lengths.
double HeavierPartOverTenJobLengths(int slots, uint64_t seed) {
  const int per_node = slots % 4 == 0 ? 4 : slots % 2 == 0 ? 2 : 1;
  return HeavierPart({.nodes = slots / per_node, .per_node = per_node, .seed = seed});
}

// The figures: 2 slots (the quickstart's cluster) and 200.
TEST(FairShareSimulation, WeightsOneToThreeGetAQuarterAndThreeQuartersOnTwoAndTwoHundredSlots) {
  for (int slots : {2, 200}) {
    const double part = HeavierPartOverTenJobLengths(slots, 11);
    std::printf("%d slots: the weight-3 tenant's part of the slot-seconds: %.3f\n", slots, part);
    EXPECT_NEAR(part, 0.75, 0.05) << slots << " slots";
  }
}

// The same over cluster sizes drawn from 2 to 1,000 slots.
TEST(FairShareSimulation, PropertyWeightsHoldOnAnyClusterSize) {
  std::mt19937_64 rng(2026);
  std::uniform_int_distribution<int> size(2, 1000);
  for (int i = 0; i < 6; ++i) {
    const int slots = size(rng);
    const double part = HeavierPartOverTenJobLengths(slots, 100 + i);
    EXPECT_NEAR(part, 0.75, 0.05) << slots << " slots";
  }
}

// The same over a simulated hour on 16 nodes of 4 slots, with 2-slot jobs of 120-600 s and a
// 15-minute half-life: slot-seconds come out 1:3 within 5%.
TEST(FairShareSimulation, WeightsOneToThreeOverAnHour) {
  const double part = HeavierPart({.nodes = 16,
                                   .per_node = 4,
                                   .job_slots = 2,
                                   .min_s = 120,
                                   .max_s = 600,
                                   .half_life_s = 900,
                                   .horizon_s = 3600,
                                   .seed = 7});
  const double ratio = part / (1 - part);
  std::printf("slot-seconds over the hour: weight 3 / weight 1: %.3f\n", ratio);
  EXPECT_NEAR(ratio, 3.0, 0.15);
}

}  // namespace
}  // namespace controlplane::service
