// How fast jobs start and finish through the whole stack: tiny jobs run to completion per second
// on one agent, and the time from submission to every rank running on an idle 2-node cluster.
//
//   jobs_bench [--jobs 100] [--slots 2] [--latency-runs 10] [--heartbeat-interval-ms 1000]
//              [--modes held,interval] [--launchers mpirun,direct]
//              [--observer list|per-job] [--poll-ms 200]
//
// With two launchers each mode's tiny-job bursts run in turn on one stack, the second's rate
// and run time printed over the first's; every burst also prints the mean of each launch phase
// its jobs' launch_phases show (docs/contracts.md, "Launch phases").
// Each mode starts its own stacks (tests/e2e/local_stack.h: a private PostgreSQL, embody-server
// and embody-agent as real processes on loopback, the server at its default heartbeat interval
// and scheduler period unless told otherwise):
//   held:     the agents ask the server to hold an idle heartbeat until a launch exists, and
//             abort a held call when a job ends (the default);
//   interval: the same agents with --no-held-heartbeats: a launch waits for the node's next
//             heartbeat and an exit for the one after it (the behaviour before held heartbeats).
// Both are measured in one run, so the ratio between them is side by side.
//
// Tiny jobs: one agent with --slots slots; `--jobs` command jobs `true` (1 node, 1 rank) are
// submitted back to back from one thread while another watches them; the rate is jobs / (the
// time all were seen finished - the first submission). Three warm-up jobs first. How they are
// watched (--observer):
//   list:    as ../shared/peers/slurm/bench.sh watches Slurm's (squeue every POLL_S = 0.2 s):
//            every --poll-ms one list call per unfinished state (GET /v1/jobs?state=S&limit=1,
//            PENDING first, so a job moving on between two calls is seen by the later one)
//            until none is left, then every job is read once to check that it SUCCEEDED;
//   per-job: GET /v1/jobs/{id} of each job in submission order every 10 ms until it ends (the
//            bench's observer before it was compared with Slurm's; about a hundred requests a
//            second, each reading the job, its events, checkpoints, forecast and pipeline).
//
// Submit to running: two agents with one slot each; a job of 2 nodes x 1 rank whose command
// prints the rank's start time (CLOCK_REALTIME, ns) and sleeps a second. Measured per run: the
// time from just before POST /v1/jobs to the later of the two ranks' start times (read from the
// ranks' logs after the job ends), and to the first poll (every 10 ms) that shows RUNNING.
// Between runs the cluster sits idle for 1.5 heartbeat intervals, so every run starts from idle
// agents at a different phase of their heartbeats.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/timing.h"
#include "common/time_util.h"
#include "tests/e2e/local_stack.h"

namespace {

using nlohmann::json;
using embody_test::HttpResult;
using embody_test::LocalStack;
using SteadyClock = std::chrono::steady_clock;

struct Options {
  int jobs = 100;
  int slots = 2;
  int latency_runs = 10;
  int heartbeat_interval_ms = 1000;
  std::vector<std::string> modes = {"held", "interval"};
  // Tiny-job bursts, one per launcher, in turn on the same stack: the ratio is side by side.
  std::vector<std::string> launchers = {"mpirun"};
  std::string job_network;  // the agents' --job-network; "": their default
  std::string observer = "list";
  int poll_ms = 200;  // the list observer's period
};

// One launcher's tiny-job burst.
struct LauncherResult {
  std::string launcher;
  double jobs_per_s = 0;
  int failed = 0;
  double run_ms_mean = 0;
  double between_ms_mean = 0;
  std::map<std::string, double> phase_ms_mean;  // launch_phases of the burst's jobs
};

struct ModeResult {
  std::string mode;
  double tiny_jobs_per_s = 0;
  int tiny_failed = 0;
  std::vector<LauncherResult> launchers;
  std::vector<double> all_ranks_ms;  // submit -> the later rank started
  std::vector<double> running_ms;    // submit -> RUNNING seen
  int latency_failed = 0;
  double run_ms_mean = 0;      // tiny jobs: RUNNING -> finished, as the server recorded them
  double between_ms_mean = 0;  // tiny jobs: the rest of each slot's time, per job
};

double Seconds(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

using bench::Percentile;
using bench::RealtimeNs;

bool Terminal(const std::string& state) {
  return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
}

// Polls the job every 10 ms until it is in a terminal state (or `timeout_s`); returns the state.
std::string WaitTerminal(LocalStack& stack, int64_t id, double timeout_s) {
  const auto end = SteadyClock::now() + std::chrono::duration<double>(timeout_s);
  while (SteadyClock::now() < end) {
    HttpResult r = stack.Get("/v1/jobs/" + std::to_string(id));
    if (r.status == 200 && Terminal(r.body.value("state", ""))) return r.body["state"];
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "TIMEOUT";
}

// How many jobs are in a state that is not terminal, as many as one list call per state shows
// (limit 1: 0 or 1 each); -1 when a call fails. States in the order a job passes them.
int UnfinishedJobs(LocalStack& stack) {
  int left = 0;
  for (const char* state : {"PENDING", "SCHEDULED", "RUNNING", "RESTARTING", "CANCELLING"}) {
    HttpResult r = stack.Get(std::string("/v1/jobs?limit=1&state=") + state);
    if (r.status != 200 || !r.body.contains("jobs")) return -1;
    left += static_cast<int>(r.body["jobs"].size());
  }
  return left;
}

int64_t Submit(LocalStack& stack, const json& spec) {
  HttpResult r = stack.Post("/v1/jobs", spec.dump());
  if (r.status != 201) {
    std::fprintf(stderr, "jobs_bench: submit answered %d: %s\n", r.status, r.text.c_str());
    return 0;
  }
  return r.body.value("id", int64_t{0});
}

void AddModeFlags(LocalStack& stack, const std::string& mode, const Options& o) {
  stack.SetHeartbeatIntervalMs(o.heartbeat_interval_ms);
  if (mode == "interval") stack.AddAgentFlags({"--no-held-heartbeats"});
  if (!o.job_network.empty()) stack.AddAgentFlags({"--job-network", o.job_network});
}

bool TinyBurst(LocalStack& stack, const std::string& mode, const std::string& launcher,
               const Options& o, LauncherResult* out) {
  json spec = {{"name", "tiny"},
               {"kind", "command"},
               {"command", {"true"}},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}}};
  if (launcher != "mpirun") spec["launcher"] = launcher;
  for (int i = 0; i < 3; ++i) {
    const int64_t id = Submit(stack, spec);
    if (id == 0 || WaitTerminal(stack, id, 60) != "SUCCEEDED") {
      std::fprintf(stderr, "jobs_bench: warm-up job %lld did not succeed\n",
                   static_cast<long long>(id));
      return false;
    }
  }
  std::vector<int64_t> ids(static_cast<size_t>(o.jobs), 0);
  std::atomic<int> submitted{0};
  const auto t0 = SteadyClock::now();
  std::thread submitter([&] {
    for (int i = 0; i < o.jobs; ++i) {
      ids[static_cast<size_t>(i)] = Submit(stack, spec);
      submitted.store(i + 1, std::memory_order_release);
    }
  });
  int failed = 0;
  SteadyClock::time_point t1;
  if (o.observer == "per-job") {
    for (int i = 0; i < o.jobs; ++i) {
      while (submitted.load(std::memory_order_acquire) <= i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      const int64_t id = ids[static_cast<size_t>(i)];
      if (id == 0 || WaitTerminal(stack, id, 120) != "SUCCEEDED") ++failed;
    }
    t1 = SteadyClock::now();
    submitter.join();
  } else {
    const auto deadline = t0 + std::chrono::seconds(120) + std::chrono::milliseconds(200) * o.jobs;
    bool done = false;
    while (!done && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
      if (submitted.load(std::memory_order_acquire) < o.jobs) continue;
      if (UnfinishedJobs(stack) != 0) continue;
      t1 = SteadyClock::now();
      // Not timed: each job read once, its end counted. One that has not ended (a list call
      // missed it) means the watch goes on.
      done = true;
      failed = 0;
      for (int64_t id : ids) {
        HttpResult r = id == 0 ? HttpResult{} : stack.Get("/v1/jobs/" + std::to_string(id));
        const std::string state = r.status == 200 ? r.body.value("state", "") : "";
        if (r.status == 200 && !Terminal(state)) {
          done = false;
          break;
        }
        if (state != "SUCCEEDED") ++failed;
      }
    }
    submitter.join();
    if (!done) {
      std::fprintf(stderr, "jobs_bench: the burst did not end within its deadline\n");
      return false;
    }
  }
  out->launcher = launcher;
  out->jobs_per_s = o.jobs / Seconds(t0, t1);
  out->failed = failed;
  std::printf("  %-8s %-7s tiny jobs: %d in %.2f s = %.1f jobs/s (%d not SUCCEEDED)\n",
              mode.c_str(), launcher.c_str(), o.jobs, Seconds(t0, t1), out->jobs_per_s, failed);
  // Where a slot's time goes, from the server's own record of each job: RUNNING (the agent
  // reported the launcher started) to finished (the exit stored) is the run on the node; the
  // rest of the slots' time in the burst is between runs (exit -> placement -> launch -> up);
  // launch_phases splits both (docs/contracts.md, "Launch phases").
  std::vector<int64_t> started, finished;
  std::map<std::string, double> phase_sum;
  int with_phases = 0;
  for (int64_t id : ids) {
    HttpResult r = stack.Get("/v1/jobs/" + std::to_string(id));
    if (r.status != 200) continue;
    if (r.body.contains("launch_phases") && r.body["launch_phases"].is_object()) {
      ++with_phases;
      for (const json& p : r.body["launch_phases"]["phases"]) {
        phase_sum[p["phase"].get<std::string>()] += p["ms"].get<double>();
      }
    }
    if (!r.body["started_at"].is_string() || !r.body["finished_at"].is_string()) continue;
    auto s = common::ParseUtcTime(r.body["started_at"].get<std::string>());
    auto f = common::ParseUtcTime(r.body["finished_at"].get<std::string>());
    if (s && f) {
      started.push_back(*s);
      finished.push_back(*f);
    }
  }
  if (started.size() > 1) {
    double run_ms = 0;
    for (size_t i = 0; i < started.size(); ++i) run_ms += static_cast<double>(finished[i] - started[i]);
    const double span_ms = static_cast<double>(*std::max_element(finished.begin(), finished.end()) -
                                               *std::min_element(started.begin(), started.end()));
    const double n = static_cast<double>(started.size());
    out->run_ms_mean = run_ms / n;
    out->between_ms_mean = std::max(0.0, span_ms * o.slots - run_ms) / n;
    std::printf("  %-8s %-7s per job and slot: %.0f ms running -> finished, %.0f ms between runs\n",
                mode.c_str(), launcher.c_str(), out->run_ms_mean, out->between_ms_mean);
  }
  if (with_phases > 0) {
    std::string line;
    for (const char* phase :
         {"queued", "dispatch", "sandbox", "spawn", "run", "cleanup", "report", "transit"}) {
      const double mean = phase_sum[phase] / with_phases;
      out->phase_ms_mean[phase] = mean;
      char cell[64];
      std::snprintf(cell, sizeof cell, " %s %.1f", phase, mean);
      line += cell;
    }
    std::printf("  %-8s %-7s launch phases, mean ms:%s\n", mode.c_str(), launcher.c_str(),
                line.c_str());
  }
  return true;
}

bool TinyJobs(const std::string& mode, const Options& o, ModeResult* out) {
  LocalStack stack(1, o.slots);
  AddModeFlags(stack, mode, o);
  if (!stack.Start()) return false;
  for (const std::string& launcher : o.launchers) {
    LauncherResult r;
    if (!TinyBurst(stack, mode, launcher, o, &r)) return false;
    out->launchers.push_back(std::move(r));
  }
  // The mode's figures are its first launcher's, as before there was a choice.
  const LauncherResult& first = out->launchers.front();
  out->tiny_jobs_per_s = first.jobs_per_s;
  out->tiny_failed = first.failed;
  out->run_ms_mean = first.run_ms_mean;
  out->between_ms_mean = first.between_ms_mean;
  if (out->launchers.size() == 2) {
    const LauncherResult& second = out->launchers[1];
    std::printf("  %-8s %s / %s: tiny jobs/s %.2fx, running -> finished %.2fx shorter\n",
                mode.c_str(), second.launcher.c_str(), first.launcher.c_str(),
                second.jobs_per_s / first.jobs_per_s, first.run_ms_mean / second.run_ms_mean);
  }
  return true;
}

bool SubmitToRunning(const std::string& mode, const Options& o, ModeResult* out) {
  LocalStack stack(2, 1);
  AddModeFlags(stack, mode, o);
  if (!stack.Start()) return false;
  const json spec = {{"name", "latency"},
                     {"kind", "command"},
                     {"command", {"sh", "-c", "date +%s%N; sleep 1"}},
                     {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}}};
  const auto idle = std::chrono::milliseconds(o.heartbeat_interval_ms * 3 / 2);
  for (int run = -1; run < o.latency_runs; ++run) {  // run -1 warms up
    std::this_thread::sleep_for(idle);
    const int64_t submit_ns = RealtimeNs();
    const auto t0 = SteadyClock::now();
    const int64_t id = Submit(stack, spec);
    if (id == 0) return false;
    double running_ms = -1;
    while (Seconds(t0, SteadyClock::now()) < 60) {
      HttpResult r = stack.Get("/v1/jobs/" + std::to_string(id));
      const std::string state = r.status == 200 ? r.body.value("state", "") : "";
      if (state == "RUNNING" || Terminal(state)) {
        running_ms = Seconds(t0, SteadyClock::now()) * 1e3;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const std::string end = WaitTerminal(stack, id, 60);
    int64_t last_start_ns = 0;
    bool ok = end == "SUCCEEDED" && running_ms >= 0;
    for (int rank = 0; rank < 2 && ok; ++rank) {
      HttpResult log =
          stack.Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank));
      int64_t ns = 0;
      ok = log.status == 200 && std::sscanf(log.text.c_str(), "%lld",
                                            reinterpret_cast<long long*>(&ns)) == 1 && ns > 0;
      last_start_ns = std::max(last_start_ns, ns);
    }
    if (!ok) {
      std::fprintf(stderr, "jobs_bench: latency job %lld ended %s\n", static_cast<long long>(id),
                   end.c_str());
      ++out->latency_failed;
      continue;
    }
    if (run < 0) continue;
    out->all_ranks_ms.push_back(static_cast<double>(last_start_ns - submit_ns) / 1e6);
    out->running_ms.push_back(running_ms);
  }
  std::printf("  %-8s submit -> all ranks started: p50 %.0f ms, max %.0f ms; -> RUNNING seen: "
              "p50 %.0f ms, max %.0f ms (%zu runs, %d failed)\n",
              mode.c_str(), Percentile(out->all_ranks_ms, 0.5),
              Percentile(out->all_ranks_ms, 1.0), Percentile(out->running_ms, 0.5),
              Percentile(out->running_ms, 1.0), out->all_ranks_ms.size(), out->latency_failed);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("jobs_bench: tiny jobs/s and submit -> running, held heartbeats vs interval");
  app.add_option("--jobs", o.jobs, "tiny jobs in the timed burst")->check(CLI::Range(1, 100000));
  app.add_option("--slots", o.slots, "slots of the tiny-jobs agent")->check(CLI::Range(1, 256));
  app.add_option("--latency-runs", o.latency_runs, "timed submit -> running runs")
      ->check(CLI::Range(1, 1000));
  app.add_option("--heartbeat-interval-ms", o.heartbeat_interval_ms, "the server's interval")
      ->check(CLI::Range(50, 600000));
  app.add_option("--modes", o.modes, "held and/or interval")->delimiter(',');
  app.add_option("--launchers", o.launchers,
                 "tiny-job bursts by launcher, in turn on one stack: mpirun and/or direct")
      ->delimiter(',');
  app.add_option("--job-network", o.job_network,
                 "the agents' --job-network (confined, host); default: theirs")
      ->check(CLI::IsMember({"confined", "host"}));
  app.add_option("--observer", o.observer,
                 "how the tiny jobs are watched: list (as Slurm's bench polls squeue) or per-job")
      ->check(CLI::IsMember({"list", "per-job"}));
  app.add_option("--poll-ms", o.poll_ms, "the list observer's period (Slurm's bench: 200)")
      ->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  // mpirun as root (the agent runs as root here and drops to job uids for the ranks).
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);

  std::vector<ModeResult> results;
  for (const std::string& mode : o.modes) {
    if (mode != "held" && mode != "interval") {
      std::fprintf(stderr, "jobs_bench: unknown mode %s\n", mode.c_str());
      return 2;
    }
    ModeResult r;
    r.mode = mode;
    if (!TinyJobs(mode, o, &r) || !SubmitToRunning(mode, o, &r)) {
      std::fprintf(stderr, "jobs_bench: the %s stack did not work\n", mode.c_str());
      return 1;
    }
    results.push_back(std::move(r));
  }
  json line = {{"bench", "jobs"},
               {"jobs", o.jobs},
               {"observer", o.observer},
               {"poll_ms", o.poll_ms},
               {"slots", o.slots},
               {"latency_runs", o.latency_runs},
               {"heartbeat_interval_ms", o.heartbeat_interval_ms},
               {"cpus", std::thread::hardware_concurrency()}};
  for (const ModeResult& r : results) {
    line[r.mode] = {{"tiny_jobs_per_s", r.tiny_jobs_per_s},
                    {"tiny_failed", r.tiny_failed},
                    {"tiny_run_ms_mean", r.run_ms_mean},
                    {"tiny_between_ms_mean", r.between_ms_mean},
                    {"all_ranks_started_ms_p50", Percentile(r.all_ranks_ms, 0.5)},
                    {"all_ranks_started_ms_max", Percentile(r.all_ranks_ms, 1.0)},
                    {"running_seen_ms_p50", Percentile(r.running_ms, 0.5)},
                    {"running_seen_ms_max", Percentile(r.running_ms, 1.0)},
                    {"latency_failed", r.latency_failed}};
    for (const LauncherResult& l : r.launchers) {
      line[r.mode]["launchers"][l.launcher] = {{"tiny_jobs_per_s", l.jobs_per_s},
                                               {"tiny_failed", l.failed},
                                               {"tiny_run_ms_mean", l.run_ms_mean},
                                               {"tiny_between_ms_mean", l.between_ms_mean},
                                               {"phase_ms_mean", l.phase_ms_mean}};
    }
  }
  if (results.size() == 2) {
    const ModeResult& held = results[0].mode == "held" ? results[0] : results[1];
    const ModeResult& interval = results[0].mode == "held" ? results[1] : results[0];
    const double jobs_ratio = held.tiny_jobs_per_s / interval.tiny_jobs_per_s;
    const double latency_ratio =
        Percentile(interval.all_ranks_ms, 0.5) / Percentile(held.all_ranks_ms, 0.5);
    std::printf("held / interval: tiny jobs/s %.2fx; submit -> all ranks started %.2fx faster "
                "(p50)\n",
                jobs_ratio, latency_ratio);
    line["held_over_interval_jobs_per_s"] = jobs_ratio;
    line["interval_over_held_all_ranks_p50"] = latency_ratio;
  }
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
