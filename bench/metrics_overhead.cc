// What reporting metrics costs the training step: embody-engine run on the same spec with step
// events posted to a real agent endpoint (EMBODY_AGENT_URL set) and without (unset), alternately
// (on, off, off, on, on, off, ...: ABBA pairs, so a drift of the machine's load hits both alike).
//
//   metrics_overhead [--engine PATH] [--runs N] [--steps N] [--d-model N] [--rows N]
//
// The endpoint is the agent's own job-local API (agent::LocalApi: token check, JSON parsing, the
// event queue and the per-job gauges), served in this process; a thread drains the queue every
// 300 ms as the agent's heartbeat does. The step time is what the engine prints on its "done:"
// line (wall time of all steps over the step count); MPI start-up is outside it. The engine's
// CPU time (all its threads, from wait4) is reported too: unlike wall time it does not move
// when other processes share the machine, so it shows what reporting adds to the engine itself.
//
// A second, in-process measurement times what the training thread itself pays per step: build
// the trainer's step event and HttpEventReporter::Post it (the reporter's thread sends the
// batches to the same endpoint), 10,000 times at two steps a millisecond. Divided by the step time
// this is the overhead with the noise of the machine taken out.
//
// Printed: each run, the median ms/step per mode, the overhead (median on / median off - 1),
// the median of the per-pair ratios, the spread of the "off" runs (the noise floor), the
// per-step cost on the training thread, and one JSON line. The target is an overhead under 1%.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/node/agent_metrics.h"
#include "agent/heartbeat/event_queue.h"
#include "agent/local_api/local_api.h"
#include "common/log.h"
#include "common/time_util.h"
#include "engine/report/event_reporter.h"

namespace {

constexpr const char* kJobId = "1";
constexpr const char* kToken = "bench-job-token";

struct Options {
  std::string engine = EMBODY_BIN_DIR "/embody-engine";
  int runs = 8;  // per mode
  int steps = 300;
  int d_model = 128;
  int rows = 1;
};

struct Run {
  bool reporting = false;
  double ms_per_step = 0;
  double cpu_ms_per_step = 0;  // user + system time of the engine process (all its threads)
  int steps = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Runs the engine once; returns its ms/step from the "done:" line, or a negative on failure.
Run RunEngine(const Options& o, const std::string& spec, const std::string& ckpt_dir,
              const std::string& agent_url) {
  Run run;
  run.reporting = !agent_url.empty();
  int out[2];
  if (pipe(out) != 0) return run;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDERR_FILENO);  // JSON log lines
    close(out[0]);
    close(out[1]);
    setenv("EMBODY_CHECKPOINT_DIR", ckpt_dir.c_str(), 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    if (run.reporting) {
      setenv("EMBODY_AGENT_URL", agent_url.c_str(), 1);
      setenv("EMBODY_JOB_ID", kJobId, 1);
      setenv("EMBODY_JOB_TOKEN", kToken, 1);
    } else {
      unsetenv("EMBODY_AGENT_URL");
      unsetenv("EMBODY_JOB_ID");
      unsetenv("EMBODY_JOB_TOKEN");
    }
    execl(o.engine.c_str(), o.engine.c_str(), "--spec", spec.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  close(out[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  run.ms_per_step = -1;
  size_t at = text.rfind("done: ");
  double seconds = 0, ms = 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && at != std::string::npos &&
      std::sscanf(text.c_str() + at, "done: %d steps in %lf s (%lf ms/step", &run.steps, &seconds,
                  &ms) == 3) {
    run.ms_per_step = ms;
    const double cpu_s = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
                         usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
    run.cpu_ms_per_step = 1e3 * cpu_s / run.steps;
  } else {
    std::fprintf(stderr, "engine run failed (status %d):\n%s\n", status, text.c_str());
  }
  return run;
}

// The step event as engine/train/trainer.cc builds it.
nlohmann::json StepEvent(int step, int steps) {
  const double step_seconds = 0.002 + 1e-9 * step;
  return {{"type", "step"},
          {"step", step},
          {"steps", steps},
          {"loss", 1.0 / step},
          {"tokens_per_s", 5.4e5 + step},
          {"samples_per_s", 3.2e4 + step},
          {"step_seconds", step_seconds},
          {"lr", 1e-3},
          {"grad_norm", 0.5},
          {"data_seconds", 1e-5},
          {"compute_seconds", step_seconds},
          {"allreduce_seconds", 1e-6},
          {"world_size", 1}};
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](int* dst) {
      if (i + 1 >= argc) return false;
      *dst = std::atoi(argv[++i]);
      return *dst > 0;
    };
    if (a == "--engine" && i + 1 < argc) {
      o->engine = argv[++i];
    } else if (!((a == "--runs" && next(&o->runs)) || (a == "--steps" && next(&o->steps)) ||
                 (a == "--d-model" && next(&o->d_model)) || (a == "--rows" && next(&o->rows)))) {
      std::fprintf(stderr,
                   "usage: metrics_overhead [--engine PATH] [--runs N] [--steps N] "
                   "[--d-model N] [--rows N]\n");
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  signal(SIGPIPE, SIG_IGN);
  common::InitLog("bench", common::LogLevel::kWarn);  // not one access-log line per post

  // The agent side: the real job-local API, drained like the heartbeat drains it.
  agent::EventQueue queue;
  agent::AgentMetrics metrics;
  agent::LocalApi api(
      [](int64_t id) -> std::optional<agent::JobIdentity> {
        if (std::to_string(id) != kJobId) return std::nullopt;
        return agent::JobIdentity{kToken, "bench"};
      },
      &queue, &metrics);
  auto port = api.Start("127.0.0.1", 0);
  if (!port.ok()) {
    std::fprintf(stderr, "cannot start the agent API: %s\n", port.status().ToString().c_str());
    return 1;
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(*port);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> received{0};
  std::thread drain([&] {
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      auto batch = queue.Peek(100000);
      received += static_cast<int64_t>(batch.events.size());
      queue.Commit(batch.last_seq);
    }
  });

  char tmpl[] = "/tmp/embody-metrics-overhead-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string spec = dir + "/spec.json";
  nlohmann::json j = {{"name", "metrics-overhead"},
                      {"kind", "train"},
                      {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
                      {"engine",
                       {{"optim", {{"steps", o.steps}, {"lr", 0.001}, {"warmup_steps", 5}}},
                        {"data", {{"rows_per_step", o.rows}}},
                        {"model", {{"d_model", o.d_model}}}}}};
  std::ofstream(spec) << j.dump(2);

  std::printf(
      "metrics_overhead: embody-engine %d steps, d_model %d, %d rows/step, %d runs per "
      "mode, events to %s\n",
      o.steps, o.d_model, o.rows, o.runs, url.c_str());
  RunEngine(o, spec, dir + "/warmup", "");  // page cache, CPU frequency
  std::vector<double> on, off, pair_ratios, cpu_on, cpu_off;
  int64_t events_per_run = 0;
  bool ok = true;
  for (int i = 0; i < 2 * o.runs && ok; ++i) {
    // ABBA: on off | off on | on off | ...
    const bool reporting = (i % 4 == 0) || (i % 4 == 3);
    const int64_t before = received;
    Run r = RunEngine(o, spec, dir + "/ck-" + std::to_string(i), reporting ? url : "");
    if (r.ms_per_step <= 0) {
      ok = false;
      break;
    }
    if (reporting) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));  // last drain
      events_per_run = received - before;
      if (events_per_run < o.steps) {
        std::fprintf(stderr, "only %lld of %d step events arrived\n",
                     static_cast<long long>(events_per_run), o.steps);
        ok = false;
      }
    }
    (reporting ? on : off).push_back(r.ms_per_step);
    (reporting ? cpu_on : cpu_off).push_back(r.cpu_ms_per_step);
    std::printf(
        "  run %2d  reporting %-3s  %.4f ms/step  engine cpu %.4f ms/step%s\n", i + 1,
        reporting ? "on" : "off", r.ms_per_step, r.cpu_ms_per_step,
        reporting ? (" (" + std::to_string(events_per_run) + " events received)").c_str() : "");
    if (i % 2 == 1) pair_ratios.push_back(on.back() / off.back());
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  if (!ok) {
    stop = true;
    drain.join();
    return 1;
  }

  // The training thread's share: the step event as engine/train/trainer.cc builds it, then Post().
  constexpr int kPosts = 10000;
  double post_us = 0, build_us = 0;
  int64_t posted = 0;
  {
    engine::ReporterConfig rc;
    rc.agent_url = url;
    rc.job_id = kJobId;
    rc.token = kToken;
    const int64_t before = received;
    engine::HttpEventReporter reporter(rc);
    double inside = 0;  // seconds spent building and posting events
    for (int i = 1; i <= kPosts; ++i) {
      const double t0 = common::MonotonicSeconds();
      reporter.Post(StepEvent(i, kPosts));
      inside += common::MonotonicSeconds() - t0;
      // Two steps a millisecond: the rest of a (fast) step, during which the reporter's thread
      // and the agent do their share, as they would beside a training loop.
      if (i % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    reporter.Close();
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    posted = received - before;
    post_us = 1e6 * inside / kPosts;
    // Of which building (and destroying) the event alone, without a reporter:
    const double b0 = common::MonotonicSeconds();
    size_t sink = 0;
    for (int i = 1; i <= kPosts; ++i) sink += StepEvent(i, kPosts).size();
    build_us = 1e6 * (common::MonotonicSeconds() - b0) / kPosts;
    if (sink == 0) std::printf("?\n");
    engine::ReporterStats rs = reporter.stats();
    std::printf(
        "in process: %d posts, %.3f us each on the training thread (building the event "
        "%.3f us); %lld sent, %lld dropped, %lld received\n",
        kPosts, post_us, build_us, static_cast<long long>(rs.events_sent),
        static_cast<long long>(rs.events_dropped), static_cast<long long>(posted));
  }
  stop = true;
  drain.join();
  api.Stop();

  const double med_on = Median(on), med_off = Median(off);
  const double overhead = med_on / med_off - 1.0;
  const double pair_overhead = Median(pair_ratios) - 1.0;
  // CPU time includes MPI start-up and the final checkpoint, the same in both modes; what differs
  // is the work reporting adds to the engine's own threads, whatever else the machine runs.
  const double cpu_overhead = Median(cpu_on) / Median(cpu_off) - 1.0;
  std::printf("reporting off: median %.4f ms/step (min %.4f)\n", med_off,
              *std::min_element(off.begin(), off.end()));
  std::printf("reporting on:  median %.4f ms/step (min %.4f)\n", med_on,
              *std::min_element(on.begin(), on.end()));
  const double noise =
      *std::max_element(off.begin(), off.end()) / *std::min_element(off.begin(), off.end()) - 1.0;
  const double thread_overhead = post_us * 1e-3 / med_off;
  std::printf("engine cpu:    off %.4f, on %.4f ms/step (median), %+.2f%%\n", Median(cpu_off),
              Median(cpu_on), 100 * cpu_overhead);
  std::printf("noise floor: the off runs spread by %.2f%% (max/min)\n", 100 * noise);
  std::printf("training thread: %.3f us per step = %.3f%% of a %.4f ms step\n", post_us,
              100 * thread_overhead, med_off);
  std::printf(
      "overhead: %+.2f%% (median on / median off), %+.2f%% (median of pair ratios); "
      "target < 1%%: %s\n",
      100 * overhead, 100 * pair_overhead, overhead < 0.01 ? "met" : "NOT met");
  nlohmann::json line = {{"bench", "metrics_overhead"},
                         {"steps", o.steps},
                         {"d_model", o.d_model},
                         {"rows_per_step", o.rows},
                         {"runs_per_mode", o.runs},
                         {"ms_per_step_off", med_off},
                         {"ms_per_step_on", med_on},
                         {"overhead_ratio", overhead},
                         {"pair_overhead_ratio", pair_overhead},
                         {"engine_cpu_ms_per_step_off", Median(cpu_off)},
                         {"engine_cpu_ms_per_step_on", Median(cpu_on)},
                         {"engine_cpu_overhead_ratio", cpu_overhead},
                         {"off_spread_ratio", noise},
                         {"post_us", post_us},
                         {"build_event_us", build_us},
                         {"training_thread_overhead_ratio", thread_overhead},
                         {"cpus", static_cast<int>(std::thread::hardware_concurrency())},
                         {"events_per_run", events_per_run}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
