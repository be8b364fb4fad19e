// scheduler_bench: the cost of one scheduling decision (controlplane/service/scheduler.h) at
// cluster scale: 1,000 nodes, 10,000 pending jobs across 50 tenants, in two states of the
// cluster: busy (about 85% of the slots held by running jobs, most with time limits, so jobs wait,
// reserve and preempt) and empty (thousands of placements). Side by side, the greedy decision it
// replaced (priority, then age; skip what does not fit; no fair share, reservations or
// preemption) on the same input. Prints ms per decision (median and best of --reps) and one JSON
// line at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <random>

#include <nlohmann/json.hpp>

#include "controlplane/service/scheduler.h"
#include "controlplane/testing/scheduler_builders.h"

namespace {

using namespace controlplane::service;
using controlplane::testing::kNowMs;

// The decision before fair share and reservations, kept here as the baseline.
size_t GreedySchedule(std::vector<PendingJob> jobs, std::vector<SchedNode> nodes) {
  std::sort(jobs.begin(), jobs.end(), [](const PendingJob& a, const PendingJob& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.submit_ms != b.submit_ms) return a.submit_ms < b.submit_ms;
    return a.job_id < b.job_id;
  });
  size_t placed = 0;
  std::vector<SchedNode*> fit;
  for (const PendingJob& job : jobs) {
    const bool gpu = job.resources.slot_type == "gpu";
    const int need = job.resources.SlotsPerNode();
    fit.clear();
    for (SchedNode& n : nodes) {
      if (!n.draining && (gpu ? n.free_gpu : n.free_cpu) >= need) fit.push_back(&n);
    }
    if (static_cast<int>(fit.size()) < job.resources.nodes) continue;
    std::stable_sort(fit.begin(), fit.end(), [&](SchedNode* a, SchedNode* b) {
      const int fa = gpu ? a->free_gpu : a->free_cpu, fb = gpu ? b->free_gpu : b->free_cpu;
      return fa != fb ? fa < fb : a->id < b->id;
    });
    for (int i = 0; i < job.resources.nodes; ++i) (gpu ? fit[i]->free_gpu : fit[i]->free_cpu) -= need;
    ++placed;
  }
  return placed;
}

ClusterSnapshot MakeCluster(int nodes, int pending, int tenants, bool busy, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  ClusterSnapshot s;
  s.now_ms = kNowMs;
  for (int i = 1; i <= nodes; ++i) {
    SchedNode n = controlplane::testing::Node(i, 64, i % 5 == 0 ? 8 : 0);  // a fifth have GPUs
    n.draining = i % 100 == 0;
    s.nodes.push_back(n);
  }
  for (int t = 1; t <= tenants; ++t) {
    SchedTenant st = controlplane::testing::Tenant(t, 1 + t % 4);
    if (t % 5 == 0) st.limits.slots = 2000;
    if (t % 7 == 0) st.limits.running_jobs = 40;
    st.usage[kCpuSlots] = uniform(0, 1'000'000);
    st.usage[kGpuSlots] = uniform(0, 100'000);
    s.tenants.push_back(st);
  }
  int64_t id = 1'000'000;
  if (busy) {
    // Running jobs of 1 to 4 nodes until about 85% of the slots are held.
    for (SchedNode& n : s.nodes) {
      while (n.free_cpu > 64 * 15 / 100) {
        const int slots = std::min(n.free_cpu, 1 << uniform(0, 4));
        const int age = uniform(0, 7200), limit = chance(0.2) ? 0 : age + uniform(60, 14400);
        RunningJob r = controlplane::testing::Running(s.nodes, ++id, {n.id}, slots,
                                                      uniform(0, 3) * 30, age, limit,
                                                      uniform(1, tenants));
        s.running.push_back(r);
      }
      while (n.free_gpu > 1) {
        RunningJob r = controlplane::testing::Running(s.nodes, ++id, {n.id}, 2, uniform(0, 3) * 30,
                                                      uniform(0, 7200), uniform(600, 20000),
                                                      uniform(1, tenants), "gpu");
        s.running.push_back(r);
      }
    }
    for (const RunningJob& r : s.running) {
      SchedTenant& t = s.tenants[r.tenant_id - 1];
      t.running_jobs += 1;
      for (const NodeShare& n : r.nodes) t.slots_in_use += n.slots;
    }
  }
  for (int p = 1; p <= pending; ++p) {
    controlplane::testing::JobArgs a;
    a.tenant = uniform(1, tenants);
    a.nodes = chance(0.8) ? 1 : 1 << uniform(1, 4);
    a.ranks_per_node = 1 << uniform(0, 3);
    a.slots_per_rank = chance(0.7) ? 1 : 2;
    a.slot_type = chance(0.15) ? "gpu" : "cpu";
    if (a.slot_type == "gpu") a.slots_per_rank = 1;
    a.priority = uniform(0, 3) * 30;
    a.limit_s = chance(0.3) ? 0 : uniform(60, 14400);
    a.submit_ms = kNowMs - uniform(0, 86'400'000);
    s.pending.push_back(controlplane::testing::Job(p, a));
  }
  return s;
}

template <typename F>
std::pair<double, double> TimeMs(int reps, F f) {  // (median, best)
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 1000, pending = 10000, tenants = 50, reps = 15;
  for (int i = 1; i + 1 < argc; i += 2) {  // the other benches' flag style
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--nodes") {
      nodes = value;
    } else if (flag == "--pending") {
      pending = value;
    } else if (flag == "--tenants") {
      tenants = value;
    } else if (flag == "--reps") {
      reps = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (nodes < 1 || pending < 0 || tenants < 1 || reps < 1) {
    std::fprintf(stderr, "--nodes, --tenants and --reps must be positive\n");
    return 2;
  }

  nlohmann::json out = {{"bench", "scheduler"}, {"nodes", nodes}, {"pending", pending},
                        {"tenants", tenants}, {"reps", reps}};
  ScheduleOptions opts;
  opts.preempt_min_priority = 90;
  for (bool busy : {true, false}) {
    const std::string name = busy ? "busy" : "empty";
    const ClusterSnapshot s = MakeCluster(nodes, pending, tenants, busy, 1);
    ScheduleDecision d;
    const auto [median, best] = TimeMs(reps, [&] { d = Schedule(s, opts); });
    size_t greedy_placed = 0;
    const auto [g_median, g_best] =
        TimeMs(reps, [&] { greedy_placed = GreedySchedule(s.pending, s.nodes); });
    std::printf("%-5s cluster: %zu running jobs, %zu pending\n", name.c_str(), s.running.size(),
                s.pending.size());
    std::printf("  decision: %8.2f ms median, %8.2f ms best  (%zu placed, %zu reservations, "
                "%zu preemptions)\n",
                median, best, d.placements.size(), d.reservations.size(), d.preemptions.size());
    std::printf("  greedy:   %8.2f ms median, %8.2f ms best  (%zu placed)\n", g_median, g_best,
                greedy_placed);
    std::printf("  decision / greedy: %.2fx\n", median / g_median);
    out[name] = {{"ms_median", median}, {"ms_best", best}, {"greedy_ms_median", g_median},
                 {"ratio_vs_greedy", median / g_median}, {"running", s.running.size()},
                 {"placed", d.placements.size()}, {"reservations", d.reservations.size()},
                 {"preemptions", d.preemptions.size()}, {"greedy_placed", greedy_placed}};
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
