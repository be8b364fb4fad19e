// forward_plan_bench: what a dry run's forecast costs the server with a deep queue, without the
// server (controlplane/service/forecast.h): the queue of forecast_bench's dry-run phase built in
// memory (--nodes one-slot nodes held by hour-long jobs, --pending jobs of its mix behind them
// over --tenants tenants), and for --asks jobs of the same mix, side by side: the forward run
// from the snapshot (ForecastStarts, what a dry run without a kept run does) against the answer
// from the snapshot's kept run (ForwardPlan::Forecast), checked to predict the same. Also the
// cost of keeping the run (ForwardPlan's construction, on the server's forecast thread). A job
// of a shape asked before is answered from the kept run's first answer (ForwardPlan keeps them):
// those are counted, and the first asks of a shape are shown apart.
//
//   forward_plan_bench [--nodes 200] [--pending 10000] [--tenants 4] [--asks 20] [--seed 1]
//                      [--hand-over-ms 800] [--holder-usage SLOT_SECONDS]
//
// --holder-usage gives the tenant whose jobs hold the nodes the fair-share usage it has on a
// server after they ran a while (forecast_bench's dry-run phase: 200 slots for minutes, some
// 100,000 slot-seconds): its queued jobs then go last, the other tenants' queues drain first,
// and a dry run's job of another tenant reserves early, so its answer decides many turns.
//
// Prints ms per answer (p50, max) for both and one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "controlplane/service/forecast.h"
#include "controlplane/testing/scheduler_builders.h"

namespace {

using namespace controlplane::service;
using controlplane::testing::kNowMs;

// CPU time of this thread (ms): what an answer costs whatever else runs on the machine.
double CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// forecast_bench's mix: nodes 1..64, limits 1..4 s.
controlplane::testing::JobArgs Draw(std::mt19937_64& rng, int tenant) {
  static constexpr int kSizes[] = {1, 2, 4, 8, 16, 32, 64};
  static constexpr int kPercent[] = {40, 15, 15, 12, 10, 5, 3};
  controlplane::testing::JobArgs a;
  a.tenant = tenant;
  a.priority = 0;
  int pick = std::uniform_int_distribution<int>(0, 99)(rng);
  for (int k = 0; k < 7; ++k) {
    if (pick < kPercent[k]) {
      a.nodes = kSizes[k];
      break;
    }
    pick -= kPercent[k];
  }
  a.limit_s = std::uniform_int_distribution<int>(1, 4)(rng);
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 200, pending = 10000, tenants = 4, asks = 20;
  uint64_t seed = 1;
  int64_t hand_over_ms = 800;
  double holder_usage = 0;
  CLI::App app{"A dry run's forecast with a deep queue: plain forward run vs the kept run"};
  app.add_option("--nodes", nodes, "one-slot nodes")->check(CLI::Range(1, 100000));
  app.add_option("--pending", pending, "jobs queued")->check(CLI::Range(0, 1000000));
  app.add_option("--tenants", tenants, "tenants")->check(CLI::Range(1, 64));
  app.add_option("--asks", asks, "dry runs timed")->check(CLI::Range(1, 100000));
  app.add_option("--seed", seed, "seed");
  app.add_option("--hand-over-ms", hand_over_ms, "from a job's end to the next start on its slots")
      ->check(CLI::Range(int64_t{0}, int64_t{600'000}));
  app.add_option("--holder-usage", holder_usage,
                 "decayed slot-seconds of the tenant whose jobs hold every node (a server's "
                 "fair-share usage after they ran a while; 0: none)")
      ->check(CLI::Range(0.0, 1e12));
  CLI11_PARSE(app, argc, argv);

  std::mt19937_64 rng(seed);
  ClusterSnapshot s;
  s.now_ms = kNowMs;
  for (int i = 1; i <= nodes; ++i) s.nodes.push_back(controlplane::testing::Node(i, 1));
  for (int t = 1; t <= tenants; ++t) s.tenants.push_back(controlplane::testing::Tenant(t));
  int64_t id = 0;
  for (int first = 1; first <= nodes; first += 64) {  // hour-long jobs hold every node
    std::vector<int64_t> on;
    for (int n = first; n < first + 64 && n <= nodes; ++n) on.push_back(n);
    s.running.push_back(controlplane::testing::Running(s.nodes, ++id, on, 1, 0, 0, 3600, 1));
    s.tenants[0].slots_in_use += static_cast<int64_t>(on.size());
    s.tenants[0].running_jobs += 1;
  }
  s.tenants[0].usage[0] = holder_usage;
  ForecastTimes times;
  times.handover_ms = hand_over_ms;
  for (int i = 0; i < pending; ++i) {
    controlplane::testing::JobArgs a = Draw(rng, 1 + i % tenants);
    a.submit_ms = kNowMs - 100'000 + i;
    PendingJob j = controlplane::testing::Job(++id, a);
    times.run_ms[j.job_id] = j.time_limit_seconds * 900;  // as the history would say
    s.pending.push_back(j);
  }
  ForecastOptions options;

  auto t0 = std::chrono::steady_clock::now();
  const ForwardPlan plan(s, times, options);
  const double plan_ms = Ms(t0);
  std::printf(
      "forward_plan_bench: %d nodes, %d pending, %d tenants; the kept run: %.1f ms, %zu "
      "turns\n",
      nodes, pending, tenants, plan_ms, plan.turns());
  std::vector<double> plain_ms, kept_ms, cold_ms, cold_cpu_ms;
  int same = 0, with_start = 0, cached = 0;
  size_t replayed = 0, jumped = 0;  // turns replayed; of them passed over to a saved state
  for (int i = 0; i < asks; ++i) {
    controlplane::testing::JobArgs a = Draw(rng, 1 + i % tenants);
    a.submit_ms = kNowMs;
    const PendingJob ask = controlplane::testing::Job(std::numeric_limits<int64_t>::max(), a);
    const int64_t run_ms = ask.time_limit_seconds * 900;
    t0 = std::chrono::steady_clock::now();
    size_t kept = 0, passed = 0;
    bool hit = false;
    const double cpu0 = CpuMs();
    const JobForecast k = plan.Forecast(ask, run_ms, &kept, &hit, &passed);
    kept_ms.push_back(Ms(t0));
    if (!hit) {
      cold_ms.push_back(kept_ms.back());
      cold_cpu_ms.push_back(CpuMs() - cpu0);
    }
    cached += hit;
    replayed += kept;
    jumped += passed;
    ClusterSnapshot with = s;
    with.pending.push_back(ask);
    ForecastTimes with_times = times;
    with_times.run_ms[ask.job_id] = run_ms;
    t0 = std::chrono::steady_clock::now();
    const JobForecast p = ForecastStarts(with, with_times, {ask.job_id}, options).at(ask.job_id);
    plain_ms.push_back(Ms(t0));
    same += k.start_ms == p.start_ms && k.waits == p.waits && k.jobs_ahead == p.jobs_ahead;
    with_start += p.start_ms.has_value();
    std::printf(
        "  ask %d: %d nodes, limit %lld s: plain %.1f ms, kept %.1f ms (%zu turns "
        "replayed%s), start +%.1f s%s\n",
        i, ask.resources.nodes, static_cast<long long>(ask.time_limit_seconds), plain_ms.back(),
        kept_ms.back(), kept, hit ? ", a kept answer" : "",
        p.start_ms ? static_cast<double>(*p.start_ms - kNowMs) / 1000.0 : -1.0,
        k.start_ms == p.start_ms ? "" : " DIFFERENT");
  }
  std::printf("| per dry run | p50 | max |\n|---|---|---|\n");
  std::printf("| forward run from the snapshot | %.1f ms | %.1f ms |\n", Percentile(plain_ms, 0.5),
              Percentile(plain_ms, 1.0));
  std::printf("| against the kept run | %.1f ms | %.1f ms |\n", Percentile(kept_ms, 0.5),
              Percentile(kept_ms, 1.0));
  std::printf("| against the kept run, first asks of a shape (%zu) | %.1f ms | %.1f ms |\n",
              cold_ms.size(), Percentile(cold_ms, 0.5), Percentile(cold_ms, 1.0));
  std::printf("| the same, CPU time of the asking thread | %.1f ms | %.1f ms |\n",
              Percentile(cold_cpu_ms, 0.5), Percentile(cold_cpu_ms, 1.0));
  std::printf("same predictions: %d of %d; with a start: %d; kept answers: %d\n", same, asks,
              with_start, cached);
  nlohmann::json line = {{"bench", "forward_plan"},
                         {"nodes", nodes},
                         {"pending", pending},
                         {"tenants", tenants},
                         {"asks", asks},
                         {"hand_over_ms", hand_over_ms},
                         {"holder_usage", holder_usage},
                         {"plan_ms", plan_ms},
                         {"plan_turns", plan.turns()},
                         {"plain_p50_ms", Percentile(plain_ms, 0.5)},
                         {"plain_max_ms", Percentile(plain_ms, 1.0)},
                         {"kept_p50_ms", Percentile(kept_ms, 0.5)},
                         {"kept_max_ms", Percentile(kept_ms, 1.0)},
                         {"kept_first_p50_ms", Percentile(cold_ms, 0.5)},
                         {"kept_first_max_ms", Percentile(cold_ms, 1.0)},
                         {"kept_first_cpu_p50_ms", Percentile(cold_cpu_ms, 0.5)},
                         {"kept_first_cpu_max_ms", Percentile(cold_cpu_ms, 1.0)},
                         {"kept_answers", cached},
                         {"replayed_turns", replayed},
                         {"jumped_turns", jumped},
                         {"same", same},
                         {"with_start", with_start}};
  std::printf("%s\n", line.dump().c_str());
  return same == asks ? 0 : 1;
}
