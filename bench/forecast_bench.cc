// How good the server's forecasts are (issue 30, docs/benchmarks.md "Forecasts"): start-time
// error on a replayed mixed workload, and dry-run latency with a deep queue.
//
//   forecast_bench [--agents 1000] [--jobs 10000] [--tenants 4] [--seed 1] [--max-limit-s 4]
//                  [--run-fraction-min 0.8] [--min-wait-s 1] [--pending 10000] [--dry-runs 250]
//                  [--submit-rate 0] [--threads 32] [--register-timeout-s 120]
//                  [--phases replay,dry-run] [--jobs-csv FILE] [--server-arg=--flag ...]
//
// It starts PostgreSQL and embody-server (bench/agent_sim/sim_stack.h) and --agents simulated
// nodes of one CPU slot each (bench/agent_sim/agent_pool.h: the real agent protocol, multi-node
// jobs' worker assignments included). Then:
//   replay: --jobs `command` jobs ["sleep", S] drawn from --seed: --tenants tenants round robin;
//     nodes 1..64 (1: 40%, 2: 15%, 4: 15%, 8: 12%, 16: 10%, 32: 5%, 64: 3%), one rank per node;
//     a time limit L of 1..--max-limit-s whole seconds (uniform), and a run time S = L * f, f
//     uniform in [--run-fraction-min, 1]: the time limit is all the forecaster knows of a command
//     job's run time (forecast_service.h), so f says how good the users' limits are. Submitted by
//     --submitters-per-tenant clients per tenant as fast as the server takes them, or, with
//     --submit-rate R, job i at i / R seconds after the replay starts (a steady arrival, so
//     later jobs are forecast with what the server learned from earlier ones); each agent
//     runs a launch for S seconds. When every job has ended, the server's own stored forecasts
//     (job_forecasts, one per job, made when the scheduler first saw it pending and judged by the
//     server against the job's start) are read back with the jobs' submit and start times: the
//     error of a job is |start_error_seconds| / (started_at - created_at). Jobs that waited under
//     --min-wait-s are counted apart (a relative error of a wait of a scheduling cycle says
//     nothing), as are jobs with no predicted start.
//   dry-run: the cluster is filled by long jobs (64 nodes each), --pending jobs of the same mix
//     are submitted behind them, and once the server has stored their forecasts, --dry-runs
//     `POST /v1/jobs?dry_run=true` of the same mix are timed from the client, one at a time,
//     after asking until one is answered against a kept forward run (the server makes those only
//     while dry runs are asked; the warm-up's asks and time are reported).
// Printed: the table, the load average and CPU model, one JSON line.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/agent_sim/agent_pool.h"
#include "bench/agent_sim/job_tracker.h"
#include "bench/agent_sim/sim_stack.h"
#include "bench/agent_sim/sim_stats.h"
#include "bench/load_average.h"
#include "bench/timing.h"
#include "common/parse_int.h"
#include "common/rng.h"
#include "common/time_util.h"

namespace {

using nlohmann::json;

struct Options {
  int agents = 1000;
  int jobs = 10000;
  int tenants = 4;
  uint64_t seed = 1;
  int max_limit_s = 4;
  double submit_rate = 0;  // jobs per second in the replay; 0: as fast as the server takes them
  double register_timeout_s = 120;
  double run_fraction_min = 0.8;
  double min_wait_s = 1.0;
  int pending = 10000;
  int dry_runs = 250;
  int threads = 32;
  int submitters_per_tenant = 2;
  int heartbeat_interval_ms = 1000;
  double timeout_s = 900;
  std::vector<std::string> phases{"replay", "dry-run"};
  std::string jobs_csv;  // the replay's jobs one per line, for a closer look; "": none
  std::vector<std::string> server_args;
};

struct JobShape {
  int tenant = 0;
  int nodes = 1;
  int limit_s = 1;
  double run_s = 1;
  double at_s = 0;  // submitted this long after its phase starts
};

// The mix: sizes by the table above, time limits uniform, run times a fraction of the limit.
std::vector<JobShape> DrawJobs(const Options& o, uint64_t stream, int count) {
  static constexpr int kSizes[] = {1, 2, 4, 8, 16, 32, 64};
  static constexpr int kPercent[] = {40, 15, 15, 12, 10, 5, 3};
  common::Rng rng = common::Rng::ForKey(o.seed, stream);
  std::vector<JobShape> out;
  for (int i = 0; i < count; ++i) {
    JobShape j;
    j.tenant = i % o.tenants;
    int pick = static_cast<int>(rng.Below(100));
    for (int k = 0; k < 7; ++k) {
      if (pick < kPercent[k]) {
        j.nodes = std::min(kSizes[k], o.agents);
        break;
      }
      pick -= kPercent[k];
    }
    j.limit_s = 1 + static_cast<int>(rng.Below(static_cast<uint64_t>(o.max_limit_s)));
    j.run_s = j.limit_s * rng.Uniform(o.run_fraction_min, 1.0);
    out.push_back(j);
  }
  return out;
}

std::string BodyOf(const JobShape& j) {
  char run[32];
  std::snprintf(run, sizeof run, "%.3f", j.run_s);
  return json{{"name", "forecast-bench"},
              {"kind", "command"},
              {"command", {"sleep", run}},
              {"resources", {{"nodes", j.nodes}, {"ranks_per_node", 1}}},
              {"time_limit_seconds", j.limit_s}}
      .dump();
}

// Submits `jobs` (of one tenant) over one kept-alive connection; each POST carries an
// Idempotency-Key, so a retry after no answer cannot submit twice.
void Submit(const bench::Stack& s, const bench::Tenant& t, const std::string& key_prefix,
            const std::vector<JobShape>& jobs, double start, double deadline,
            bench::SimStats* stats, bench::JobTracker* tracker) {
  auto client = bench::ClientFor(s.url, t.token);
  if (!client.ok()) {
    stats->Error("submit: " + client.status().ToString());
    return;
  }
  for (size_t i = 0; i < jobs.size() && common::MonotonicSeconds() < deadline; ++i) {
    const double wait = start + jobs[i].at_s - common::MonotonicSeconds();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    common::http::Request req;
    req.method = "POST";
    req.path = "/v1/jobs";
    req.body = BodyOf(jobs[i]);
    req.headers.push_back({"Idempotency-Key", key_prefix + std::to_string(i)});
    for (int attempt = 0; attempt < 5; ++attempt) {
      const double t0 = common::MonotonicSeconds();
      auto res = (*client)->Call(req);
      if (res.ok()) {
        stats->Sample("post_jobs", common::MonotonicSeconds() - t0);
        const json j = json::parse(res->body, nullptr, false);
        const int64_t id = j.is_discarded() ? 0 : j.value("id", int64_t{0});
        if (id == 0) stats->Error("submit: reply without id");
        if (id != 0 && tracker) tracker->Submitted(id, common::MonotonicSeconds());
        break;
      }
      const common::Code code = res.status().code();
      stats->Error(std::string("submit: ") + common::CodeName(code));
      if (code != common::Code::kUnavailable && code != common::Code::kResourceExhausted) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    }
  }
}

// Every job of `jobs` submitted by clients_per_tenant clients per tenant at once.
void SubmitAll(const bench::Stack& s, const std::vector<bench::Tenant>& tenants,
               const std::string& phase, const std::vector<JobShape>& jobs, int clients_per_tenant,
               double deadline, bench::SimStats* stats, bench::JobTracker* tracker) {
  const int clients = static_cast<int>(tenants.size()) * clients_per_tenant;
  std::vector<std::vector<JobShape>> shares(clients);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int t = jobs[i].tenant;
    shares[t + static_cast<int>(tenants.size()) *
                   static_cast<int>((i / tenants.size()) % clients_per_tenant)]
        .push_back(jobs[i]);
  }
  std::vector<std::thread> threads;
  const double start = common::MonotonicSeconds();
  for (int c = 0; c < clients; ++c) {
    const bench::Tenant& t = tenants[c % tenants.size()];
    const std::string prefix =
        "fc-" + std::to_string(::getpid()) + "-" + phase + "-" + std::to_string(c) + "-";
    threads.emplace_back(
        [&, c, prefix] { Submit(s, t, prefix, shares[c], start, deadline, stats, tracker); });
  }
  for (auto& th : threads) th.join();
}

// psql's -At output as rows of '|'-separated fields.
std::vector<std::vector<std::string>> Rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    size_t at = 0;
    for (;;) {
      size_t bar = line.find('|', at);
      f.push_back(line.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    rows.push_back(std::move(f));
  }
  return rows;
}

common::Result<int64_t> CountOf(const bench::Stack& s, const std::string& sql) {
  EMBODY_ASSIGN_OR_RETURN(out, s.pg->Psql(sql));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return common::ParseInt64(out, 0, std::numeric_limits<int64_t>::max(), "count");
}

std::optional<double> Number(const std::string& field) {
  if (field.empty()) return std::nullopt;  // NULL
  return std::strtod(field.c_str(), nullptr);
}

double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0.0; }

struct ReplayResult {
  json line;
  bool ok = false;
};

// The replay's jobs as the server recorded them and its judged forecasts of their starts.
ReplayResult ReadForecasts(const Options& o, const bench::Stack& s, double wall_s) {
  ReplayResult r;
  // The server judges forecasts every second, 500 rows at a time: wait for it to catch up.
  const char* kUnjudged =
      "SELECT count(*) FROM jobs j JOIN job_forecasts f ON f.job_id = j.id "
      "WHERE j.started_at IS NOT NULL AND f.predicted_start IS NOT NULL "
      "AND f.start_error_seconds IS NULL";
  for (int i = 0; i < 120; ++i) {
    auto n = CountOf(s, kUnjudged);
    if (n.ok() && *n == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  auto out = s.pg->Psql(
      "SELECT j.state, j.spec->'resources'->>'nodes', "
      "extract(epoch from j.started_at - j.created_at), "
      "extract(epoch from f.made_at - j.created_at), "
      "extract(epoch from f.predicted_start - f.made_at), f.start_error_seconds, "
      "f.job_id IS NOT NULL, j.id, (j.spec->>'time_limit_seconds') "
      "FROM jobs j LEFT JOIN job_forecasts f ON f.job_id = j.id ORDER BY j.id");
  if (!out.ok()) {
    std::fprintf(stderr, "forecast_bench: reading forecasts: %s\n",
                 out.status().ToString().c_str());
    return r;
  }
  int64_t jobs = 0, succeeded = 0, started = 0, with_row = 0, predicted = 0, trivial = 0;
  int64_t judged = 0;
  std::vector<double> rel, abs_err, signed_err, waits, lag, rel_small, rel_large;
  FILE* csv = o.jobs_csv.empty() ? nullptr : std::fopen(o.jobs_csv.c_str(), "w");
  if (csv) {
    std::fprintf(csv, "id,nodes,limit_s,wait_s,made_after_submit_s,predicted_wait_s,error_s\n");
  }
  for (const auto& f : Rows(*out)) {
    if (f.size() != 9) continue;
    if (csv) {
      std::fprintf(csv, "%s,%s,%s,%s,%s,%s,%s\n", f[7].c_str(), f[1].c_str(), f[8].c_str(),
                   f[2].c_str(), f[3].c_str(), f[4].c_str(), f[5].c_str());
    }
    ++jobs;
    if (f[0] == "SUCCEEDED") ++succeeded;
    const auto wait = Number(f[2]);
    if (wait) ++started;
    if (f[6] == "t") ++with_row;
    const auto made = Number(f[3]);
    if (made) lag.push_back(*made);
    if (Number(f[4])) ++predicted;
    const auto err = Number(f[5]);
    if (!wait || !err) continue;
    ++judged;
    if (*wait < o.min_wait_s) {
      ++trivial;
      continue;
    }
    waits.push_back(*wait);
    abs_err.push_back(std::fabs(*err));
    signed_err.push_back(*err);
    const double e = std::fabs(*err) / *wait;
    rel.push_back(e);
    (std::atoi(f[1].c_str()) <= 4 ? rel_small : rel_large).push_back(e);
  }
  if (csv) std::fclose(csv);
  double mean_signed = 0;
  for (double e : signed_err) mean_signed += e;
  if (!signed_err.empty()) mean_signed /= static_cast<double>(signed_err.size());
  const double p50 = bench::Percentile(rel, 0.5), p90 = bench::Percentile(rel, 0.9);
  std::printf("\nreplay: %lld jobs, %lld SUCCEEDED, %lld started, in %.1f s\n",
              static_cast<long long>(jobs), static_cast<long long>(succeeded),
              static_cast<long long>(started), wall_s);
  std::printf("| forecasts | |\n|---|---|\n");
  std::printf("| stored (one per job) | %lld of %lld |\n", static_cast<long long>(with_row),
              static_cast<long long>(jobs));
  std::printf("| with a predicted start | %lld |\n", static_cast<long long>(predicted));
  std::printf("| judged against the job's start | %lld |\n", static_cast<long long>(judged));
  std::printf("| waited under %.1f s (not in the errors) | %lld |\n", o.min_wait_s,
              static_cast<long long>(trivial));
  std::printf("| evaluated | %zu (wait p50 %.1f s, p90 %.1f s, max %.1f s) |\n", rel.size(),
              bench::Percentile(waits, 0.5), bench::Percentile(waits, 0.9),
              bench::Percentile(waits, 1.0));
  std::printf("| **error / wait, median** | **%.1f%%** (goal < 10%%) |\n", 100 * p50);
  std::printf("| **error / wait, p90** | **%.1f%%** (goal < 30%%) |\n", 100 * p90);
  std::printf("| error / wait, jobs of 1-4 nodes: median / p90 | %.1f%% / %.1f%% (n=%zu) |\n",
              100 * bench::Percentile(rel_small, 0.5), 100 * bench::Percentile(rel_small, 0.9),
              rel_small.size());
  std::printf("| error / wait, jobs of 8-64 nodes: median / p90 | %.1f%% / %.1f%% (n=%zu) |\n",
              100 * bench::Percentile(rel_large, 0.5), 100 * bench::Percentile(rel_large, 0.9),
              rel_large.size());
  std::printf("| absolute error median / p90 | %.2f s / %.2f s |\n",
              bench::Percentile(abs_err, 0.5), bench::Percentile(abs_err, 0.9));
  std::printf("| mean of actual - predicted (bias) | %+.2f s |\n", mean_signed);
  std::printf("| forecast made after submission, p50 / p99 | %.2f s / %.2f s |\n",
              bench::Percentile(lag, 0.5), bench::Percentile(lag, 0.99));
  r.ok = jobs == o.jobs && succeeded == o.jobs && with_row == jobs;
  r.line = {{"jobs", jobs},
            {"succeeded", succeeded},
            {"forecast_rows", with_row},
            {"predicted", predicted},
            {"judged", judged},
            {"trivial_waits", trivial},
            {"evaluated", rel.size()},
            {"rel_error_p50", p50},
            {"rel_error_p90", p90},
            {"rel_error_small_p50", bench::Percentile(rel_small, 0.5)},
            {"rel_error_large_p50", bench::Percentile(rel_large, 0.5)},
            {"abs_error_p50_s", bench::Percentile(abs_err, 0.5)},
            {"abs_error_p90_s", bench::Percentile(abs_err, 0.9)},
            {"bias_s", mean_signed},
            {"wait_p50_s", bench::Percentile(waits, 0.5)},
            {"wait_p90_s", bench::Percentile(waits, 0.9)},
            {"made_lag_p50_s", bench::Percentile(lag, 0.5)},
            {"made_lag_p99_s", bench::Percentile(lag, 0.99)},
            {"wall_s", wall_s}};
  return r;
}

ReplayResult Replay(const Options& o, const bench::Stack& s,
                    const std::vector<bench::Tenant>& tenants, bench::SimStats* stats,
                    bench::JobTracker* tracker) {
  std::vector<JobShape> jobs = DrawJobs(o, /*stream=*/1, o.jobs);
  if (o.submit_rate > 0) {
    for (size_t i = 0; i < jobs.size(); ++i) jobs[i].at_s = static_cast<double>(i) / o.submit_rate;
  }
  const double t0 = common::MonotonicSeconds();
  const double deadline = t0 + o.timeout_s;
  std::printf("replay: submitting %d jobs\n", o.jobs);
  std::fflush(stdout);
  SubmitAll(s, tenants, "replay", jobs, o.submitters_per_tenant, deadline, stats, tracker);
  const int64_t submitted = tracker->Get().submitted;
  std::printf("  submitted %lld in %.1f s (load average %.1f)\n", static_cast<long long>(submitted),
              common::MonotonicSeconds() - t0, bench::LoadAverage());
  std::fflush(stdout);
  double last = common::MonotonicSeconds();
  while (tracker->finished() < submitted && common::MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (common::MonotonicSeconds() - last < 10) continue;
    last = common::MonotonicSeconds();
    const auto t = tracker->Get();
    std::printf("  ... %lld launched, %lld finished (load average %.1f)\n",
                static_cast<long long>(t.launched), static_cast<long long>(t.finished),
                bench::LoadAverage());
    std::fflush(stdout);
  }
  return ReadForecasts(o, s, common::MonotonicSeconds() - t0);
}

json DryRuns(const Options& o, const bench::Stack& s, const std::vector<bench::Tenant>& tenants,
             bench::SimStats* stats, bool* ok) {
  *ok = false;
  const double deadline = common::MonotonicSeconds() + o.timeout_s;
  // Long jobs on every node, so what is submitted next waits.
  std::vector<JobShape> fill;
  for (int left = o.agents; left > 0; left -= 64) {
    fill.push_back({0, std::min(64, left), 3600, 3600.0});
  }
  SubmitAll(s, tenants, "fill", fill, 1, deadline, stats, nullptr);
  const std::vector<JobShape> queue = DrawJobs(o, /*stream=*/2, o.pending);
  const double t0 = common::MonotonicSeconds();
  SubmitAll(s, tenants, "queue", queue, o.submitters_per_tenant, deadline, stats, nullptr);
  std::printf("\ndry-run: %zu long jobs fill the nodes, %d jobs submitted behind them in %.1f s\n",
              fill.size(), o.pending, common::MonotonicSeconds() - t0);
  // Wait for the server to have forecast them all: its forward runs compete for the CPU.
  int64_t pending = 0, rows = 0;
  while (common::MonotonicSeconds() < deadline) {
    auto p = CountOf(s, "SELECT count(*) FROM jobs WHERE state = 'PENDING'");
    auto f = CountOf(s,
                     "SELECT count(*) FROM jobs j JOIN job_forecasts f ON f.job_id = j.id "
                     "WHERE j.state = 'PENDING'");
    if (p.ok()) pending = *p;
    if (f.ok()) rows = *f;
    if (p.ok() && f.ok() && rows == pending) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::printf("  %lld pending, %lld of them forecast (after %.1f s); load average %.1f\n",
              static_cast<long long>(pending), static_cast<long long>(rows),
              common::MonotonicSeconds() - t0, bench::LoadAverage());
  std::fflush(stdout);

  const std::vector<JobShape> asks = DrawJobs(o, /*stream=*/3, o.dry_runs);
  std::vector<std::unique_ptr<common::http::Client>> clients;
  for (const auto& t : tenants) {
    auto c = bench::ClientFor(s.url, t.token);
    if (!c.ok()) return {{"error", c.status().ToString()}};
    clients.push_back(std::move(*c));
  }
  // The server runs its snapshots' queues forward for dry runs only while they are being asked:
  // ask until an answer comes from such a run (or 60 s), and report how long that took.
  const double warm_start = common::MonotonicSeconds();
  int warm_asks = 0;
  double first_ask_ms = 0;
  for (bool planned = false; !planned && common::MonotonicSeconds() - warm_start < 60;) {
    common::http::Request req;
    req.method = "POST";
    req.path = "/v1/jobs?dry_run=true";
    req.body = BodyOf(asks.front());
    const double t1 = common::MonotonicSeconds();
    auto res = clients[asks.front().tenant]->Call(req);
    if (warm_asks++ == 0) first_ask_ms = (common::MonotonicSeconds() - t1) * 1000.0;
    const json f = res.ok() ? json::parse(res->body, nullptr, false) : json();
    planned = f.is_object() && f.value("cluster_from", "") == "scheduler_plan";
    if (!planned) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double warm_s = common::MonotonicSeconds() - warm_start;
  std::printf("  warm-up: %d dry runs over %.1f s until one was answered against a kept forward "
              "run (the first took %.1f ms)\n",
              warm_asks, warm_s, first_ask_ms);
  std::vector<double> ms, plan_ms, other_ms;  // all; against a kept run; the others
  int64_t answered = 0, with_start = 0, from_snapshot = 0, from_plan = 0;
  std::vector<double> hand_over_s;  // the server's learned hand-over, as each answer says
  const double load_before = bench::LoadAverage();
  for (const JobShape& j : asks) {
    common::http::Request req;
    req.method = "POST";
    req.path = "/v1/jobs?dry_run=true";
    req.body = BodyOf(j);
    const double t1 = common::MonotonicSeconds();
    auto res = clients[j.tenant]->Call(req);
    const double t2 = common::MonotonicSeconds();
    if (!res.ok()) {
      stats->Error(std::string("dry run: ") + common::CodeName(res.status().code()));
      continue;
    }
    ms.push_back((t2 - t1) * 1000.0);
    const json f = json::parse(res->body, nullptr, false);
    if (!f.is_discarded() && f.value("admitted", false)) ++answered;
    const std::string from = f.is_discarded() ? "" : f.value("cluster_from", "");
    if (from == "scheduler_snapshot" || from == "scheduler_plan") ++from_snapshot;
    if (from == "scheduler_plan") ++from_plan;
    (from == "scheduler_plan" ? plan_ms : other_ms).push_back(ms.back());
    if (!f.is_discarded()) hand_over_s.push_back(f.value("hand_over_seconds", 0.0));
    if (!f.is_discarded() && f.contains("predicted_start") && !f["predicted_start"].is_null()) {
      ++with_start;
    }
  }
  const double p50 = bench::Percentile(ms, 0.5), p99 = bench::Percentile(ms, 0.99);
  std::printf("| dry runs with %lld jobs pending | |\n|---|---|\n",
              static_cast<long long>(pending));
  std::printf("| answered (admitted) / asked | %lld / %d |\n", static_cast<long long>(answered),
              o.dry_runs);
  std::printf("| with a predicted start | %lld |\n", static_cast<long long>(with_start));
  std::printf("| from the scheduler's snapshot (else the database) | %lld |\n",
              static_cast<long long>(from_snapshot));
  std::printf("| of which against the snapshot's kept forward run (scheduler_plan) | %lld |\n",
              static_cast<long long>(from_plan));
  std::printf("| learned hand-over (server), median of answers | %.3f s |\n",
              bench::Percentile(hand_over_s, 0.5));
  std::printf("| latency p50 | %.1f ms |\n", p50);
  std::printf("| **latency p99** | **%.1f ms** (goal < 50 ms) |\n", p99);
  std::printf("| latency max | %.1f ms |\n", bench::Percentile(ms, 1.0));
  const auto over = std::count_if(ms.begin(), ms.end(), [](double v) { return v > 50.0; });
  std::printf("| answers over 50 ms | %lld of %zu |\n", static_cast<long long>(over), ms.size());
  std::printf("| against a kept run: p50 / p90 / p99 / max | %.1f / %.1f / %.1f / %.1f ms |\n",
              bench::Percentile(plan_ms, 0.5), bench::Percentile(plan_ms, 0.9),
              bench::Percentile(plan_ms, 0.99), bench::Percentile(plan_ms, 1.0));
  std::printf("| the others (%zu): p50 / max | %.1f / %.1f ms |\n", other_ms.size(),
              bench::Percentile(other_ms, 0.5), bench::Percentile(other_ms, 1.0));
  std::printf("| load average before / after | %.1f / %.1f |\n", load_before, bench::LoadAverage());
  *ok = answered == o.dry_runs && pending >= o.pending;
  return {{"pending", pending},
          {"forecast_rows", rows},
          {"asked", o.dry_runs},
          {"answered", answered},
          {"with_start", with_start},
          {"from_snapshot", from_snapshot},
          {"from_plan", from_plan},
          {"warm_up_asks", warm_asks},
          {"warm_up_s", warm_s},
          {"first_ask_ms", first_ask_ms},
          {"hand_over_s", bench::Percentile(hand_over_s, 0.5)},
          {"p50_ms", p50},
          {"p99_ms", p99},
          {"max_ms", bench::Percentile(ms, 1.0)},
          {"p90_ms", bench::Percentile(ms, 0.9)},
          {"over_50_ms", over},
          {"plan_p50_ms", bench::Percentile(plan_ms, 0.5)},
          {"plan_p99_ms", bench::Percentile(plan_ms, 0.99)},
          {"plan_max_ms", bench::Percentile(plan_ms, 1.0)},
          {"other_max_ms", bench::Percentile(other_ms, 1.0)}};
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "forecast_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Forecast accuracy on a replayed workload, and dry-run latency with a deep queue"};
  app.add_option("--agents", o.agents, "simulated nodes (one CPU slot each)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--jobs", o.jobs, "jobs in the replay")->check(CLI::Range(1, 1000000));
  app.add_option("--tenants", o.tenants, "tenants")->check(CLI::Range(1, 64));
  app.add_option("--seed", o.seed, "seed of the workload");
  app.add_option("--max-limit-s", o.max_limit_s, "time limits are 1..this many seconds")
      ->check(CLI::Range(1, 3600));
  app.add_option("--run-fraction-min", o.run_fraction_min, "run time = limit * U[this, 1]")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-wait-s", o.min_wait_s, "waits shorter than this are counted apart")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--pending", o.pending, "jobs pending during the dry runs")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--dry-runs", o.dry_runs, "dry runs timed")->check(CLI::Range(1, 100000));
  app.add_option("--threads", o.threads, "threads driving the agents")->check(CLI::Range(1, 1024));
  app.add_option("--submit-rate", o.submit_rate,
                 "replay jobs submitted per second, steadily (0: as fast as the server takes them)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--register-timeout-s", o.register_timeout_s,
                 "how long the agents may take to register")
      ->check(CLI::PositiveNumber);
  app.add_option("--submitters-per-tenant", o.submitters_per_tenant, "clients per tenant")
      ->check(CLI::Range(1, 64));
  app.add_option("--heartbeat-interval-ms", o.heartbeat_interval_ms, "the server's interval")
      ->check(CLI::Range(50, 600000));
  app.add_option("--timeout-s", o.timeout_s, "give up on a phase after this long")
      ->check(CLI::PositiveNumber);
  app.add_option("--phases", o.phases, "replay, dry-run")->delimiter(',');
  app.add_option("--jobs-csv", o.jobs_csv,
                 "write the replay's jobs (size, limit, wait, forecast, error) to this file");
  app.add_option("--server-arg", o.server_args, "a flag for embody-server")
      ->allow_extra_args(false);
  CLI11_PARSE(app, argc, argv);
  const auto has = [&](const char* p) {
    return std::find(o.phases.begin(), o.phases.end(), p) != o.phases.end();
  };

  struct rlimit files;  // a kept-alive connection per agent, here and in the server
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  bench::Stack stack;
  bench::StackOptions so;
  so.server_binary = std::string(EMBODY_BIN_DIR) + "/embody-server";
  so.heartbeat_interval_ms = o.heartbeat_interval_ms;
  so.server_args = o.server_args;
  if (common::Status st = bench::StartStack(so, &stack); !st.ok()) return Fail(st.ToString());
  auto tenants = bench::MakeTenants(stack, o.tenants);
  if (!tenants.ok()) return Fail(tenants.status().ToString());
  std::printf(
      "forecast_bench: %d nodes x 1 slot, %d jobs over %d tenants, limits 1..%d s, run "
      "time limit x U[%.2f, 1], seed %llu; CPU %s, %u CPUs, load average %.1f\n",
      o.agents, o.jobs, o.tenants, o.max_limit_s, o.run_fraction_min,
      static_cast<unsigned long long>(o.seed), bench::CpuModel().c_str(),
      std::thread::hardware_concurrency(), bench::LoadAverage());
  std::fflush(stdout);

  bench::SimStats stats;
  bench::JobTracker tracker;
  bench::AgentPoolOptions po;
  po.server_url = stack.url;
  po.join_token = stack.join_token;
  po.credential_dir = stack.dir + "/credentials";
  std::filesystem::create_directories(po.credential_dir);
  po.agents = o.agents;
  po.threads = o.threads;
  po.cpu_slots = 1;
  po.name_prefix = "fc" + std::to_string(::getpid());
  bench::AgentPool pool(po, &stats, &tracker);
  pool.Start();
  const double reg_start = common::MonotonicSeconds();
  const double reg_deadline = reg_start + o.register_timeout_s;
  while (pool.registered() < o.agents && common::MonotonicSeconds() < reg_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (pool.registered() < o.agents) {
    return Fail(std::to_string(pool.registered()) + " of " + std::to_string(o.agents) +
                " agents registered in " + std::to_string(o.register_timeout_s) +
                " s (--register-timeout-s)");
  }
  const double reg_s = common::MonotonicSeconds() - reg_start;
  std::printf("%d agents registered in %.1f s (load average %.1f)\n", o.agents, reg_s,
              bench::LoadAverage());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // every node UP in the scheduler's view

  json line = {{"bench", "forecast"},
               {"agents", o.agents},
               {"jobs", o.jobs},
               {"tenants", o.tenants},
               {"seed", o.seed},
               {"max_limit_s", o.max_limit_s},
               {"run_fraction_min", o.run_fraction_min},
               {"min_wait_s", o.min_wait_s},
               {"submit_rate", o.submit_rate},
               {"threads", o.threads},
               {"register_s", reg_s},
               {"cpus", static_cast<int>(std::thread::hardware_concurrency())},
               {"load_average_start", bench::LoadAverage()}};
  bool ok = true;
  if (has("replay")) {
    ReplayResult r = Replay(o, stack, *tenants, &stats, &tracker);
    line["replay"] = r.line;
    ok = ok && r.ok;
  }
  if (has("dry-run")) {
    bool dry_ok = false;
    line["dry_run"] = DryRuns(o, stack, *tenants, &stats, &dry_ok);
    ok = ok && dry_ok;
  }
  pool.Stop();
  const auto errors = stats.Errors();
  std::printf("errors:");
  if (errors.empty()) std::printf(" none");
  for (const auto& [kind, n] : errors) {
    std::printf(" [%s] %lld", kind.c_str(), static_cast<long long>(n));
  }
  std::printf("\nPOST /v1/jobs p50 %.1f ms, p99 %.1f ms; heartbeats p99 %.1f ms; DOWN gaps %lld\n",
              stats.Of("post_jobs").p50_ms, stats.Of("post_jobs").p99_ms,
              stats.Of("heartbeat").p99_ms, static_cast<long long>(pool.down_gaps()));
  line["errors"] = errors;
  line["down_gaps"] = pool.down_gaps();
  line["load_average_end"] = bench::LoadAverage();
  line["complete"] = ok;
  std::printf("load average at end: %.1f\n%s\n", bench::LoadAverage(), line.dump().c_str());
  std::fflush(stdout);
  if (stack.server) stack.server->Stop();
  stack.pg.reset();
  std::error_code ec;
  if (ok) std::filesystem::remove_all(stack.dir, ec);
  return ok ? 0 : 1;
}
