// Randomized properties of the decision, checked by code of their own on hundreds of random
// clusters: gangs are whole and fit in what is free, quotas are never exceeded, never-fit jobs
// never start, victims are strictly lower priority and chosen once, and nothing started now
// delays a reservation (replaying the expected ends, every reservation still has its slots at its
// start). Each failure prints the seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "controlplane/service/scheduler.h"
#include "controlplane/testing/scheduler_builders.h"

namespace controlplane::service {
namespace {

using testing::Between;
using testing::kNowMs;
using testing::Pick;

struct World {
  ClusterSnapshot s;
  ScheduleOptions o;
};

World RandomWorld(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  World w;
  w.s.now_ms = kNowMs;
  const int nodes = Between(rng, 1, 24);
  for (int i = 1; i <= nodes; ++i) {
    SchedNode n = testing::Node(i, Pick(rng, {2, 4, 8, 16}), Pick(rng, {0, 0, 2, 4, 8}));
    n.draining = chance(0.1);
    w.s.nodes.push_back(n);
  }
  const int tenants = Between(rng, 1, 5);
  for (int t = 1; t <= tenants; ++t) {
    SchedTenant st = testing::Tenant(t, 0.5 + Between(rng, 0, 7) * 0.5);
    if (chance(0.3)) st.limits.slots = Between(rng, 4, 64);
    if (chance(0.3)) st.limits.running_jobs = Between(rng, 1, 10);
    if (chance(0.2)) st.limits.nodes_per_job = Between(rng, 1, 4);
    st.usage[kCpuSlots] = Between(rng, 0, 100000);
    w.s.tenants.push_back(st);
  }
  int64_t id = 1000;
  const int running = Between(rng, 0, 3 * nodes);
  for (int r = 0; r < running; ++r) {
    const std::string type = chance(0.7) ? "cpu" : "gpu";
    const int slots = Pick(rng, {1, 1, 2, 4});
    std::vector<int64_t> on;
    for (const SchedNode& n : w.s.nodes) {
      const int free = type == "gpu" ? n.free_gpu : n.free_cpu;
      if (free >= slots && chance(0.3) && on.size() < 3) on.push_back(n.id);
    }
    if (on.empty()) continue;
    RunningJob j = testing::Running(w.s.nodes, ++id, on, slots, Pick(rng, {0, 10, 50, 90}),
                                    Between(rng, 0, 1000), chance(0.3) ? 0 : Between(rng, 60, 2000),
                                    Between(rng, 1, tenants), type);
    j.preempting = chance(0.1);
    for (SchedTenant& t : w.s.tenants) {
      if (t.id != j.tenant_id) continue;
      t.slots_in_use += static_cast<int64_t>(slots) * static_cast<int64_t>(on.size());
      t.running_jobs += 1;
    }
    w.s.running.push_back(j);
  }
  const int pending = Between(rng, 0, 60);
  for (int p = 1; p <= pending; ++p) {
    testing::JobArgs a;
    a.tenant = Between(rng, 1, tenants);
    a.nodes = Pick(rng, {1, 1, 1, 2, 3, 4});
    a.ranks_per_node = Pick(rng, {1, 1, 2, 4});
    a.slots_per_rank = Pick(rng, {1, 1, 2});
    a.slot_type = chance(0.8) ? "cpu" : "gpu";
    a.priority = Pick(rng, {0, 10, 50, 90});
    a.limit_s = chance(0.3) ? 0 : Between(rng, 30, 3000);
    a.submit_ms = Between(rng, 1, 1000000);
    w.s.pending.push_back(testing::Job(p, a));
  }
  w.o.max_reservations = Between(rng, 1, 8);
  if (chance(0.5)) w.o.preempt_min_priority = Pick(rng, {50, 90});
  w.o.preempt_grace_ms = Between(rng, 1, 120) * 1000;
  return w;
}

// Replays the model every lane by every expected change and says where it goes below zero.
std::string ReservationsHold(const World& w, const ScheduleDecision& d) {
  const ClusterSnapshot& s = w.s;
  std::map<std::pair<int64_t, std::string>, std::map<int64_t, int64_t>> steps;  // lane: t -> d
  std::map<std::pair<int64_t, std::string>, int64_t> level;
  for (const SchedNode& n : s.nodes) {
    level[{n.id, "cpu"}] = n.free_cpu;
    level[{n.id, "gpu"}] = n.free_gpu;
  }
  std::set<int64_t> victims;
  for (const Preemption& p : d.preemptions) victims.insert(p.victims.begin(), p.victims.end());
  const int64_t gone = s.now_ms + w.o.preempt_grace_ms;
  for (const RunningJob& r : s.running) {
    int64_t end = r.time_limit_seconds > 0
                      ? std::max(r.start_ms + r.time_limit_seconds * 1000, s.now_ms + 1)
                      : INT64_MAX;
    if (r.preempting || victims.count(r.job_id)) end = std::min(end, gone);
    if (end == INT64_MAX) continue;
    for (const NodeShare& n : r.nodes) steps[{n.node_id, r.slot_type}][end] += n.slots;
  }
  std::map<int64_t, const PendingJob*> pending;
  for (const PendingJob& p : s.pending) pending[p.job_id] = &p;
  for (const Placement& p : d.placements) {
    const PendingJob& j = *pending.at(p.job_id);
    for (const NodeShare& n : p.nodes) {
      level[{n.node_id, p.slot_type}] -= n.slots;
      if (j.time_limit_seconds > 0) {
        steps[{n.node_id, p.slot_type}][s.now_ms + j.time_limit_seconds * 1000] += n.slots;
      }
    }
  }
  for (const Reservation& r : d.reservations) {
    const PendingJob& j = *pending.at(r.job_id);
    for (int64_t node : r.node_ids) {
      steps[{node, j.resources.slot_type}][r.start_ms] -= j.resources.SlotsPerNode();
    }
  }
  for (auto& [lane, free] : level) {
    if (free < 0) return "node " + std::to_string(lane.first) + " over-allocated now";
    for (const auto& [t, delta] : steps[lane]) {
      free += delta;
      if (free < 0) {
        return "node " + std::to_string(lane.first) + " " + lane.second + " short at +" +
               std::to_string(t - s.now_ms) + " ms";
      }
    }
  }
  return "";
}

void CheckDecision(const World& w, const ScheduleDecision& d) {
  const ClusterSnapshot& s = w.s;
  std::map<int64_t, const PendingJob*> pending;
  for (const PendingJob& p : s.pending) pending[p.job_id] = &p;
  std::map<int64_t, const SchedTenant*> tenants;
  for (const SchedTenant& t : s.tenants) tenants[t.id] = &t;
  std::map<int64_t, const SchedNode*> nodes;
  for (const SchedNode& n : s.nodes) nodes[n.id] = &n;

  // Every job is decided once and considered once.
  std::multiset<int64_t> decided;
  for (const Placement& p : d.placements) decided.insert(p.job_id);
  for (const auto& [id, why] : d.waiting) decided.insert(id);
  std::multiset<int64_t> all, order(d.order.begin(), d.order.end());
  for (const PendingJob& p : s.pending) all.insert(p.job_id);
  EXPECT_EQ(decided, all);
  EXPECT_EQ(order, all);

  // Gangs are whole, on distinct usable nodes, within what is free; quotas hold.
  std::map<std::pair<int64_t, std::string>, int64_t> used;
  std::map<int64_t, int64_t> tenant_slots, tenant_jobs;
  for (const Placement& p : d.placements) {
    const PendingJob& j = *pending.at(p.job_id);
    const api::Resources& r = j.resources;
    ASSERT_EQ(static_cast<int>(p.nodes.size()), r.nodes) << "job " << p.job_id;
    EXPECT_EQ(p.slot_type, r.slot_type);
    std::set<int64_t> distinct;
    for (const NodeShare& n : p.nodes) {
      ASSERT_TRUE(nodes.count(n.node_id));
      EXPECT_FALSE(nodes.at(n.node_id)->draining) << "job " << p.job_id;
      EXPECT_EQ(n.slots, r.SlotsPerNode());
      EXPECT_EQ(n.ranks, r.ranks_per_node);
      distinct.insert(n.node_id);
      used[{n.node_id, p.slot_type}] += n.slots;
    }
    EXPECT_EQ(static_cast<int>(distinct.size()), r.nodes);
    tenant_slots[j.tenant_id] += static_cast<int64_t>(r.nodes) * r.SlotsPerNode();
    tenant_jobs[j.tenant_id] += 1;
    const TenantLimits limits = tenants.count(j.tenant_id) ? tenants.at(j.tenant_id)->limits
                                                           : TenantLimits{};
    EXPECT_FALSE(WhyNeverFits(r, limits, RegisteredSizes(s)).has_value()) << "job " << p.job_id;
  }
  for (const auto& [lane, n] : used) {
    const SchedNode& node = *nodes.at(lane.first);
    EXPECT_LE(n, lane.second == "gpu" ? node.free_gpu : node.free_cpu) << "node " << lane.first;
  }
  for (const SchedTenant& t : s.tenants) {
    if (tenant_jobs[t.id] == 0) continue;  // running jobs alone may be over a lowered quota
    if (t.limits.slots) {
      EXPECT_LE(t.slots_in_use + tenant_slots[t.id], *t.limits.slots);
    }
    if (t.limits.running_jobs) {
      EXPECT_LE(t.running_jobs + tenant_jobs[t.id], *t.limits.running_jobs);
    }
  }
  for (const auto& [id, why] : d.waiting) {
    const PendingJob& j = *pending.at(id);
    const TenantLimits limits = tenants.count(j.tenant_id) ? tenants.at(j.tenant_id)->limits
                                                           : TenantLimits{};
    EXPECT_EQ(WhyNeverFits(j.resources, limits, RegisteredSizes(s)).has_value(),
              why.rfind("never fits:", 0) == 0)
        << "job " << id << ": " << why;
  }

  // Victims: strictly lower priority than the job they make room for, each chosen once.
  std::map<int64_t, const RunningJob*> running;
  for (const RunningJob& r : s.running) running[r.job_id] = &r;
  std::set<int64_t> victims;
  for (const Preemption& p : d.preemptions) {
    ASSERT_TRUE(w.o.preempt_min_priority.has_value());
    const PendingJob& j = *pending.at(p.job_id);
    EXPECT_GE(j.priority, *w.o.preempt_min_priority);
    EXPECT_TRUE(d.waiting.count(p.job_id));
    for (int64_t v : p.victims) {
      ASSERT_TRUE(running.count(v));
      EXPECT_LT(running.at(v)->priority, j.priority);
      EXPECT_FALSE(running.at(v)->preempting);
      EXPECT_TRUE(victims.insert(v).second) << "victim " << v << " chosen twice";
    }
  }

  EXPECT_EQ(ReservationsHold(w, d), "");
}

TEST(SchedulePropertyTest, RandomClusters) {
  int reservations = 0, preemptions = 0, placements = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const World w = RandomWorld(seed);
    const ScheduleDecision d = Schedule(w.s, w.o);
    CheckDecision(w, d);
    reservations += static_cast<int>(d.reservations.size());
    preemptions += static_cast<int>(d.preemptions.size());
    placements += static_cast<int>(d.placements.size());
    if (::testing::Test::HasFailure()) return;
  }
  // The worlds must exercise every rule, or the checks above prove little.
  EXPECT_GT(reservations, 100);
  EXPECT_GT(preemptions, 20);
  EXPECT_GT(placements, 1000);
}

// Later jobs never move an earlier job's reservation: deciding only the jobs up to the reserving
// one (in the decision's order) gives the same reservation.
TEST(SchedulePropertyTest, BackfillNeverMovesAReservation) {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    World w = RandomWorld(seed);
    const ScheduleDecision d = Schedule(w.s, w.o);
    if (d.reservations.empty()) continue;
    const Reservation& first = d.reservations.front();
    std::set<int64_t> prefix;
    for (int64_t id : d.order) {
      prefix.insert(id);
      if (id == first.job_id) break;
    }
    std::erase_if(w.s.pending, [&](const PendingJob& p) { return !prefix.count(p.job_id); });
    const ScheduleDecision alone = Schedule(w.s, w.o);
    ASSERT_FALSE(alone.reservations.empty());
    EXPECT_EQ(alone.reservations.front().job_id, first.job_id);
    EXPECT_EQ(alone.reservations.front().start_ms, first.start_ms);
    EXPECT_EQ(alone.reservations.front().node_ids, first.node_ids);
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace controlplane::service
