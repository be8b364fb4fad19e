// A thousand agents against one embody-server: registration, heartbeats, job placement and
// completion at cluster scale, with the server's cost measured from outside it.
//
//   agent_simulator [--agents 1000] [--jobs 10000] [--tenants 4] [--slots 8] [--job-seconds 2]
//                   [--threads 64] [--submitters-per-tenant 2] [--idle-seconds 10]
//                   [--keep-alive 1] [--check]
//                   [--server URL --join-token T --admin-token T [--server-pid PID]]
//                   [--server-arg=--db-pool-size=32 ...]
//
// Without --server it starts a private stack: PostgreSQL (tests/support/pg_harness.h) and the
// embody-server binary as a child process (so its CPU and memory are its own in /proc), with
// --heartbeat-interval-ms and any --server-arg. Then:
//   1. --tenants tenants, each with a member token (cluster-admin calls);
//   2. --agents simulated agents (bench/agent_sim/agent_pool.h: a few threads, each agent a state
//      machine speaking api/agent_protocol.h through agent::HttpServerChannel) register, and
//      heartbeat idle for --idle-seconds;
//   3. --submitters-per-tenant clients per tenant POST its share of --jobs `command` jobs (1 node,
//      1 rank) while a prober GETs /v1/jobs?limit=50 every --probe-ms; each agent "runs" every job
//      it is given for --job-seconds and reports it finished (exit 0) with two step events and a
//      log line;
//   4. when every job's end is acknowledged, or the server holds none that is not terminal (a job
//      failed by a node the server held DOWN is never launched or never acknowledged), or
//      --timeout-s passes, every tenant's jobs are listed and counted by state.
// Printed: registration time and latency; heartbeat latency p50/p99/max idle and under load;
// time from the first submission until every job was launched and until every job ended; the
// submit-to-launch wait; POST and GET /v1/jobs latency under load; CPU seconds of the server, of
// PostgreSQL and of this process per phase, the server's peak RSS and threads, PostgreSQL's peak
// backends; errors by kind; one JSON line. With --check the exit status is 1 unless every job
// SUCCEEDED and no heartbeat or registration failed.
//
// Node metrics (CPU, memory, GPU series) do not travel in heartbeats in this protocol: agents
// export them at their own /metrics for Prometheus (docs/contracts.md), which is not simulated.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/agent_sim/agent_pool.h"
#include "bench/agent_sim/job_tracker.h"
#include "bench/agent_sim/proc_sampler.h"
#include "bench/agent_sim/sim_stack.h"
#include "bench/agent_sim/sim_stats.h"
#include "common/http/client.h"
#include "common/time_util.h"

namespace {

using nlohmann::json;

struct Options {
  int agents = 1000;
  int jobs = 10000;
  int tenants = 4;
  int slots = 8;
  double job_seconds = 2;
  int threads = 64;
  int submitters_per_tenant = 2;
  double idle_seconds = 10;
  int probe_ms = 100;
  bool keep_alive = true;
  double timeout_s = 900;
  int heartbeat_interval_ms = 1000;
  bool check = false;
  std::string server;
  std::string join_token;
  std::string admin_token;
  int server_pid = 0;
  std::vector<std::string> server_args;
};

using bench::CallJson;
using bench::ClientFor;
using bench::ReadAll;
using bench::Stack;
using bench::Tenant;

// Submits `count` jobs for one tenant over one kept-alive connection, each with an
// Idempotency-Key so a retry after no answer cannot submit twice. Retries answers that say
// "later" (unavailable, resource_exhausted) a few times. Stops at `deadline`.
void Submit(const Stack& s, const Tenant& t, const std::string& client_name, int count,
            double deadline, bench::SimStats* stats, bench::JobTracker* tracker) {
  auto client = ClientFor(s.url, t.token);
  if (!client.ok()) {
    stats->Error("submit: " + client.status().ToString());
    return;
  }
  const std::string body = json{{"name", "sim"},
                                {"kind", "command"},
                                {"command", {"true"}},
                                {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}}}
                               .dump();
  const std::string key_prefix = "sim-" + std::to_string(::getpid()) + "-" + client_name + "-";
  for (int i = 0; i < count && common::MonotonicSeconds() < deadline; ++i) {
    common::http::Request req;
    req.method = "POST";
    req.path = "/v1/jobs";
    req.body = body;
    req.headers.push_back({"Idempotency-Key", key_prefix + std::to_string(i)});
    for (int attempt = 0; attempt < 5; ++attempt) {
      const double t0 = common::MonotonicSeconds();
      auto res = (*client)->Call(req);
      const double t1 = common::MonotonicSeconds();
      if (res.ok()) {
        stats->Sample("api/post_jobs", t1 - t0);
        const json j = json::parse(res->body, nullptr, false);
        const int64_t id = j.is_discarded() ? 0 : j.value("id", int64_t{0});
        if (id == 0)
          stats->Error("submit: reply without id");
        else
          tracker->Submitted(id, t1);
        break;
      }
      const common::Code code = res.status().code();
      stats->Error(std::string("submit: ") + common::CodeName(code));
      if (code != common::Code::kUnavailable && code != common::Code::kResourceExhausted) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    }
  }
}

// Counts one tenant's jobs by state, page by page.
// Jobs by state; `why` (optional) counts the reasons of jobs that did not succeed.
common::Status CountStates(const Stack& s, const Tenant& t, std::map<std::string, int64_t>* out,
                           std::map<std::string, int64_t>* why = nullptr) {
  EMBODY_ASSIGN_OR_RETURN(client, ClientFor(s.url, t.token));
  std::string cursor;
  for (int page = 0; page < 100000; ++page) {
    std::string path = "/v1/jobs?limit=500";
    if (!cursor.empty()) path += "&cursor=" + cursor;
    EMBODY_ASSIGN_OR_RETURN(j, CallJson(*client, "GET", path));
    for (const auto& job : j.value("jobs", json::array())) {
      const std::string state = job.value("state", "?");
      ++(*out)[state];
      if (why && state != "SUCCEEDED") ++(*why)[state + ": " + job.value("reason", "")];
    }
    if (!j.contains("next_cursor") || j["next_cursor"].is_null()) return common::Status::Ok();
    cursor = j["next_cursor"].get<std::string>();
  }
  return common::Internal("too many pages");
}

bool Terminal(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
}

// Whether any tenant holds a job that is not terminal (true when the listing fails).
bool TenantsHaveLiveJobs(const Stack& s, const std::vector<Tenant>& tenants) {
  std::map<std::string, int64_t> states;
  for (const auto& t : tenants) {
    if (!CountStates(s, t, &states).ok()) return true;
  }
  for (const auto& [state, n] : states) {
    if (!Terminal(state) && n > 0) return true;
  }
  return false;
}

// CPU seconds of the server, PostgreSQL and this process at one moment.
struct CpuMark {
  double server = 0, pg = 0, self = 0, at = 0;
};

CpuMark MarkCpu(const Stack& s) {
  return {bench::ReadProcUsage(s.server_pid).cpu_s, bench::ReadPgUsage(s.postmaster).cpu_s,
          bench::ReadProcUsage(::getpid()).cpu_s, common::MonotonicSeconds()};
}

json CpuBetween(const CpuMark& a, const CpuMark& b) {
  const double wall = std::max(1e-9, b.at - a.at);
  return {{"wall_s", wall},
          {"server_cpu_s", b.server - a.server},
          {"pg_cpu_s", b.pg - a.pg},
          {"client_cpu_s", b.self - a.self},
          {"server_cores", (b.server - a.server) / wall},
          {"pg_cores", (b.pg - a.pg) / wall},
          {"client_cores", (b.self - a.self) / wall}};
}

json PercentilesJson(const bench::Percentiles& p) {
  return {{"count", p.count}, {"p50_ms", p.p50_ms}, {"p99_ms", p.p99_ms}, {"max_ms", p.max_ms}};
}

void PrintLatency(const char* what, const bench::Percentiles& p) {
  std::printf("  %-28s n=%-7zu p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", what, p.count, p.p50_ms,
              p.p99_ms, p.max_ms);
}

void PrintCpu(const char* phase, const json& c) {
  std::printf(
      "  %-8s %6.1f s wall: server %.1f CPU s (%.2f cores), PostgreSQL %.1f (%.2f), "
      "simulator %.1f (%.2f)\n",
      phase, c["wall_s"].get<double>(), c["server_cpu_s"].get<double>(),
      c["server_cores"].get<double>(), c["pg_cpu_s"].get<double>(), c["pg_cores"].get<double>(),
      c["client_cpu_s"].get<double>(), c["client_cores"].get<double>());
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "agent_simulator: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"N simulated agents and M jobs against one embody-server"};
  app.add_option("--agents", o.agents, "simulated agents")->check(CLI::Range(1, 100000));
  app.add_option("--jobs", o.jobs, "command jobs to submit")->check(CLI::Range(0, 10000000));
  app.add_option("--tenants", o.tenants, "tenants (one submitter each)")->check(CLI::Range(1, 64));
  app.add_option("--slots", o.slots, "CPU slots per simulated node")->check(CLI::Range(1, 4096));
  app.add_option("--job-seconds", o.job_seconds, "how long each job runs")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--threads", o.threads, "threads driving the agents")->check(CLI::Range(1, 1024));
  app.add_option("--submitters-per-tenant", o.submitters_per_tenant,
                 "concurrent submitting clients per tenant")
      ->check(CLI::Range(1, 64));
  app.add_option("--idle-seconds", o.idle_seconds, "heartbeats without jobs before submitting")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--probe-ms", o.probe_ms, "period of the GET /v1/jobs probe")
      ->check(CLI::Range(1, 60000));
  app.add_option("--keep-alive", o.keep_alive,
                 "1: each agent keeps its connection (as embody-agent); 0: a connection per call");
  app.add_option("--timeout-s", o.timeout_s, "give up waiting for the jobs after this long")
      ->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-interval-ms", o.heartbeat_interval_ms,
                 "the private server's heartbeat interval")
      ->check(CLI::Range(50, 600000));
  app.add_flag("--check", o.check, "exit 1 unless every job SUCCEEDED and no heartbeat failed");
  app.add_option("--server", o.server, "an embody-server to target instead of a private one");
  app.add_option("--join-token", o.join_token, "with --server: the cluster join token");
  app.add_option("--admin-token", o.admin_token, "with --server: a cluster-admin token");
  app.add_option("--server-pid", o.server_pid, "with --server: its pid, for CPU and memory");
  app.add_option("--server-arg", o.server_args, "a flag for the private embody-server")
      ->allow_extra_args(false);
  CLI11_PARSE(app, argc, argv);
  if (!o.server.empty() && (o.join_token.empty() || o.admin_token.empty())) {
    return Fail("--server needs --join-token and --admin-token");
  }

  // A kept-alive connection per agent is a descriptor per agent, here and in the server (which
  // inherits this limit): the usual soft limit of 1,024 is too few for 1,000 agents.
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  Stack stack;
  bench::StackOptions so;
  so.server_binary = std::string(EMBODY_BIN_DIR) + "/embody-server";
  so.heartbeat_interval_ms = o.heartbeat_interval_ms;
  so.server_args = o.server_args;
  so.server = o.server;
  so.join_token = o.join_token;
  so.admin_token = o.admin_token;
  so.server_pid = o.server_pid;
  if (common::Status st = bench::StartStack(so, &stack); !st.ok()) return Fail(st.ToString());
  auto tenants = bench::MakeTenants(stack, o.tenants);
  if (!tenants.ok()) return Fail(tenants.status().ToString());
  // Other work on the machine slows the server as much as the agents do: say how busy it was.
  std::printf("load average at start: %s", ReadAll("/proc/loadavg").c_str());
  std::printf(
      "agent_simulator: %d agents x %d slots, %d jobs of %.1f s over %d tenants, %d "
      "threads, keep-alive %d, %u CPUs; server %s (pid %d, log %s/server.log)\n",
      o.agents, o.slots, o.jobs, o.job_seconds, o.tenants, o.threads, o.keep_alive,
      std::thread::hardware_concurrency(), stack.url.c_str(), static_cast<int>(stack.server_pid),
      stack.dir.c_str());
  std::fflush(stdout);

  bench::SimStats stats;
  bench::JobTracker tracker;
  bench::PeakSampler peaks(stack.server_pid, stack.postmaster, 0.5);
  bench::AgentPoolOptions po;
  po.server_url = stack.url;
  po.join_token = stack.join_token;
  po.credential_dir = stack.dir + "/credentials";
  std::filesystem::create_directories(po.credential_dir);
  po.agents = o.agents;
  po.threads = o.threads;
  po.cpu_slots = o.slots;
  po.job_seconds = o.job_seconds;
  po.keep_alive = o.keep_alive;
  po.name_prefix = "sim" + std::to_string(::getpid());
  bench::AgentPool pool(po, &stats, &tracker);

  // 1. Registration.
  const CpuMark m0 = MarkCpu(stack);
  pool.SetPhase("register");
  pool.Start();
  const double deadline = m0.at + o.timeout_s;
  while (pool.registered() < o.agents && common::MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const CpuMark m1 = MarkCpu(stack);
  const double registration_s = m1.at - m0.at;
  std::printf("registered %d/%d agents in %.2f s\n", pool.registered(), o.agents, registration_s);
  std::fflush(stdout);

  // 2. Idle heartbeats.
  pool.SetPhase("idle");
  std::this_thread::sleep_for(std::chrono::duration<double>(o.idle_seconds));
  const CpuMark m2 = MarkCpu(stack);
  const int64_t idle_beats = pool.heartbeats();

  // 3. Submissions and the probe while the jobs run.
  pool.SetPhase("load");
  std::atomic<bool> probing{true};
  std::thread prober([&] {
    auto client = ClientFor(stack.url, (*tenants)[0].token);
    if (!client.ok()) return;
    common::http::Request req;
    req.path = "/v1/jobs?limit=50";
    while (probing.load()) {
      const double t0 = common::MonotonicSeconds();
      auto res = (*client)->Call(req);
      if (res.ok())
        stats.Sample("api/get_jobs", common::MonotonicSeconds() - t0);
      else
        stats.Error(std::string("probe: ") + common::CodeName(res.status().code()));
      std::this_thread::sleep_for(std::chrono::milliseconds(o.probe_ms));
    }
  });
  std::vector<std::thread> submitters;
  const int clients = o.tenants * o.submitters_per_tenant;
  for (int c = 0; c < clients; ++c) {
    const int share = o.jobs / clients + (c < o.jobs % clients ? 1 : 0);
    const Tenant& tenant = (*tenants)[c % o.tenants];
    submitters.emplace_back([&, c, share, &tenant = tenant] {
      Submit(stack, tenant, std::to_string(c), share, deadline, &stats, &tracker);
    });
  }
  for (auto& th : submitters) th.join();
  const double submitted_at = common::MonotonicSeconds();
  const int64_t submitted = tracker.Get().submitted;
  std::printf("submitted %lld/%d jobs in %.2f s\n", static_cast<long long>(submitted), o.jobs,
              submitted_at - m2.at);
  std::fflush(stdout);
  double last_report = submitted_at;
  int64_t finished_at_report = -1;
  while (tracker.finished() < submitted && common::MonotonicSeconds() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (common::MonotonicSeconds() - last_report < 5) continue;
    last_report = common::MonotonicSeconds();
    const auto t = tracker.Get();
    std::printf("  ... %lld launched, %lld finished\n", static_cast<long long>(t.launched),
                static_cast<long long>(t.finished));
    std::fflush(stdout);
    // No progress for a while: ask the server whether anything is left to run.
    if (t.finished == finished_at_report && !TenantsHaveLiveJobs(stack, *tenants)) break;
    finished_at_report = t.finished;
  }
  probing = false;
  prober.join();
  const CpuMark m3 = MarkCpu(stack);
  const int64_t load_beats = pool.heartbeats() - idle_beats;
  const bench::ProcUsage server_usage = bench::ReadProcUsage(stack.server_pid);
  pool.Stop();

  // 4. What the server says.
  std::map<std::string, int64_t> states, why_not;
  common::Status counted = common::Status::Ok();
  for (const auto& t : *tenants) {
    counted = CountStates(stack, t, &states, &why_not);
    if (!counted.ok()) break;
  }
  const auto totals = tracker.Get();
  std::vector<double> waits = totals.submit_to_launch_s;
  bench::SimStats wait_stats;
  for (double w : waits) wait_stats.Sample("wait", w);

  const double place_all_s = totals.launched > 0 ? totals.last_launch - totals.first_submit : 0;
  const double finish_all_s = totals.finished > 0 ? totals.last_finish - totals.first_submit : 0;
  std::printf(
      "jobs: %lld submitted, %lld launched (%lld launch commands, %lld repeated), "
      "%lld finished (%lld nonzero)\n",
      static_cast<long long>(totals.submitted), static_cast<long long>(totals.launched),
      static_cast<long long>(totals.launches), static_cast<long long>(pool.repeated_launches()),
      static_cast<long long>(totals.finished), static_cast<long long>(totals.finished_nonzero));
  std::printf(
      "  first submission -> all launched %.2f s, -> all finished %.2f s "
      "(%.1f jobs/s finished)\n",
      place_all_s, finish_all_s, finish_all_s > 0 ? totals.finished / finish_all_s : 0.0);
  std::printf("  server's job states:");
  for (const auto& [state, n] : states)
    std::printf(" %s %lld", state.c_str(), static_cast<long long>(n));
  if (!counted.ok()) std::printf(" (listing failed: %s)", counted.ToString().c_str());
  std::printf("\n");
  for (const auto& [why, n] : why_not) {
    std::printf("    %lld %s\n", static_cast<long long>(n), why.c_str());
  }
  std::printf("latency:\n");
  PrintLatency("register", stats.Of("register"));
  PrintLatency("heartbeat, idle", stats.Of("heartbeat/idle"));
  PrintLatency("heartbeat, under load", stats.Of("heartbeat/load"));
  PrintLatency("POST /v1/jobs, under load", stats.Of("api/post_jobs"));
  PrintLatency("GET /v1/jobs, under load", stats.Of("api/get_jobs"));
  PrintLatency("submit -> launch", wait_stats.Of("wait"));
  PrintLatency("heartbeat start lateness", stats.Of("lateness"));
  PrintLatency("silence between heartbeats", stats.Of("silence"));
  const bench::Percentiles hb_idle = stats.Of("heartbeat/idle");
  const bench::Percentiles hb_load = stats.Of("heartbeat/load");
  const double load_over_idle = hb_idle.p99_ms > 0 ? hb_load.p99_ms / hb_idle.p99_ms : 0;
  std::printf("heartbeat p99 under load / idle, side by side in this run: %.2f\n", load_over_idle);
  std::printf("gaps over 3 heartbeat intervals (the server's DOWN rule): %lld, and %lld more "
              "only because this process started the heartbeat late\n",
              static_cast<long long>(pool.down_gaps()), static_cast<long long>(pool.late_gaps()));
  const bench::Percentiles late = stats.Of("lateness");
  if (late.p99_ms > o.heartbeat_interval_ms / 4.0) {
    std::printf(
        "NOTE: heartbeats started late (p99 %.0f ms): every driving thread was waiting "
        "on the server, or this process was short of CPU (see below)\n",
        late.p99_ms);
  }
  const double idle_wall = std::max(1e-9, m2.at - m1.at);
  const double load_wall = std::max(1e-9, m3.at - m2.at);
  std::printf("heartbeats/s: idle %.0f (%d agents at %.2f s), under load %.0f\n",
              (idle_beats) / idle_wall, o.agents, o.heartbeat_interval_ms / 1000.0,
              load_beats / load_wall);
  const json cpu = {
      {"register", CpuBetween(m0, m1)}, {"idle", CpuBetween(m1, m2)}, {"load", CpuBetween(m2, m3)}};
  std::printf("CPU:\n");
  PrintCpu("register", cpu["register"]);
  PrintCpu("idle", cpu["idle"]);
  PrintCpu("load", cpu["load"]);
  std::printf("server: peak RSS %.1f MiB, peak threads %d; PostgreSQL peak backends %d\n",
              server_usage.peak_rss_bytes / 1048576.0, peaks.max_server_threads(),
              peaks.max_pg_backends());
  const auto errors = stats.Errors();
  std::printf("errors:");
  if (errors.empty()) std::printf(" none");
  for (const auto& [kind, n] : errors)
    std::printf(" [%s] %lld", kind.c_str(), static_cast<long long>(n));
  std::printf("\n");

  std::printf("load average at end: %s", ReadAll("/proc/loadavg").c_str());
  const int64_t succeeded = states.count("SUCCEEDED") ? states.at("SUCCEEDED") : 0;
  const int64_t agent_failures = stats.ErrorCount("heartbeat") + stats.ErrorCount("register");
  const bool all_ok = counted.ok() && submitted == o.jobs && succeeded == o.jobs &&
                      totals.finished == o.jobs && totals.finished_nonzero == 0 &&
                      agent_failures == 0 && pool.down_gaps() == 0 && pool.registered() == o.agents;
  json line = {{"bench", "agent_simulator"},
               {"agents", o.agents},
               {"slots_per_agent", o.slots},
               {"jobs", o.jobs},
               {"tenants", o.tenants},
               {"job_seconds", o.job_seconds},
               {"threads", o.threads},
               {"keep_alive", o.keep_alive},
               {"heartbeat_interval_ms", o.heartbeat_interval_ms},
               {"cpus", static_cast<int>(std::thread::hardware_concurrency())},
               {"registration_s", registration_s},
               {"register", PercentilesJson(stats.Of("register"))},
               {"heartbeat_idle", PercentilesJson(stats.Of("heartbeat/idle"))},
               {"heartbeat_load", PercentilesJson(stats.Of("heartbeat/load"))},
               {"post_jobs", PercentilesJson(stats.Of("api/post_jobs"))},
               {"get_jobs", PercentilesJson(stats.Of("api/get_jobs"))},
               {"submit_to_launch", PercentilesJson(wait_stats.Of("wait"))},
               {"lateness", PercentilesJson(stats.Of("lateness"))},
               {"silence", PercentilesJson(stats.Of("silence"))},
               {"heartbeat_p99_load_over_idle", load_over_idle},
               {"down_gaps", pool.down_gaps()},
               {"late_gaps", pool.late_gaps()},
               {"submitters_per_tenant", o.submitters_per_tenant},
               {"submitted", totals.submitted},
               {"launched", totals.launched},
               {"finished", totals.finished},
               {"place_all_s", place_all_s},
               {"finish_all_s", finish_all_s},
               {"states", states},
               {"cpu", cpu},
               {"server_peak_rss_bytes", server_usage.peak_rss_bytes},
               {"server_peak_threads", peaks.max_server_threads()},
               {"pg_peak_backends", peaks.max_pg_backends()},
               {"errors", errors},
               {"all_succeeded", all_ok}};
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  if (stack.server) stack.server->Stop();
  stack.pg.reset();
  std::error_code ec;
  if (all_ok) std::filesystem::remove_all(stack.dir, ec);
  if (o.check && !all_ok) return Fail("check failed: see the figures above");
  return 0;
}
