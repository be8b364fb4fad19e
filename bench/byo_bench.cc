// byo_bench: a user's own PyTorch code as Embody command jobs (docs/byo.md), measured against the
// goals of "Bring your own trainer" on a 2-node cluster on loopback (tests/e2e/local_stack.h:
// a private PostgreSQL, embody-server and two embody-agents with one slot each, real processes;
// the server at its default heartbeat interval; read has a stack of its own). The jobs are
// bench/byo_job.py, run by Debian's python3-torch (gloo); every figure is read from the jobs' own
// logs ("BYO <json>" lines).
//
//   byo_bench [--parts init,ddp,resume,read] [--launchers mpirun,torchrun] [--init-runs 5]
//             [--blocks 16] [--block-steps 150]
//             [--hidden 512] [--batch 256] [--demos 64] [--frames 100] [--image 84]
//
//   init    submit -> every rank returned from init_process_group(env://), 2 nodes x 1 rank,
//           with the default launcher (one process per rank) and with "launcher": "torchrun":
//           from just before POST /v1/jobs to the wall clock each rank prints after the call,
//           the later rank's; also to each interpreter's first line (process started) and to
//           `import torch` done, and from `import torch` done to init_process_group returned (the
//           rendezvous alone; p50 and p90 of the runs). The cluster sits idle 1.5 heartbeat
//           intervals before each run.
//           Goals: < 2 s, torchrun < 4 s.
//   ddp     a 2-layer MLP under DistributedDataParallel on 2 nodes x 1 rank: the ranks' SHA-256
//           of their parameters at the end (goal: equal), and the step time with embody.report
//           (step, loss, lr; delivery flushed inside the block) vs without, ABBA blocks in the
//           same job: the ratio of wall time per step (goal: < 1.01 for a ~10 ms step), and of
//           rank 0's process CPU time per step (the SDK's sender thread included).
//   resume  the same model 100 steps undisturbed, then again held after step 50 and preempted
//           there by a job of higher priority on both nodes: the checkpoint is step 50, the next
//           attempt's first step is 51, and its final loss against the undisturbed one's
//           (goal: within 1%).
//   read    a robomimic-layout file (1 camera, --image square, low-dim keys) imported through the
//           API on a stack of its own (one agent with 2 slots); embody.data in command jobs bound
//           to it: ds.samples() in one process in a 1-slot and in a 2-slot job (each job prints
//           its cgroup CPU limit and the cores its affinity allows), and a DataLoader over
//           ds.torch() with 2 workers in the 2-slot job, vs the storage loader embody-engine
//           reads shards with (storage::StreamSamples over the epoch's Partition, 1 and 2
//           read-ahead threads; 2 is the engine's default), run in this process on the same
//           directory before and after the jobs (the better of the two); CPU time per sample of
//           both. Goal: the 2-slot job >= 50% of 2 threads.
// The last line is JSON.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/timing.h"
#include "storage/dataset_reader.h"
#include "storage/partition.h"
#include "storage/testing/robomimic_file.h"
#include "tests/e2e/local_stack.h"

namespace {

namespace fs = std::filesystem;
using embody_test::HttpResult;
using embody_test::LocalStack;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> parts = {"init", "ddp", "resume", "read"};
  int init_runs = 5;
  int blocks = 16, block_steps = 150, hidden = 512, batch = 256;
  int demos = 64, frames = 100, image = 84;
  int heartbeat_interval_ms = 1000;
  std::string python = "/usr/bin/python3";
  std::string job_network;  // the agents' --job-network; "": their default
  std::vector<std::string> launchers = {"mpirun", "torchrun"};  // init: which to time
};

const std::string kScript = std::string(EMBODY_BENCH_DIR) + "/byo_job.py";

using bench::Percentile;
using bench::RealtimeNs;

// A 2-node x 1-rank command job running byo_job.py with `args`, by either launcher.
json JobSpec(const std::string& name, const Options& o, const std::string& launcher,
             const std::vector<std::string>& args, int priority = 10) {
  json command = json::array();
  if (launcher != "torchrun") command.push_back(o.python);
  command.push_back(kScript);
  for (const auto& a : args) command.push_back(a);
  json spec = {{"name", name},
               {"kind", "command"},
               {"priority", priority},
               {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}},
               {"command", command}};
  if (launcher == "torchrun") spec["launcher"] = "torchrun";
  return spec;
}

int64_t Submit(LocalStack& stack, const json& spec) {
  HttpResult r = stack.Post("/v1/jobs", spec.dump());
  if (r.status != 201) {
    std::fprintf(stderr, "byo_bench: submit answered %d: %s\n", r.status, r.text.c_str());
    return 0;
  }
  return r.body.value("id", int64_t{0});
}

json Finished(LocalStack& stack, int64_t id, double timeout_s = 600) {
  return stack.WaitForState(id, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout_s);
}

std::string Log(LocalStack& stack, int64_t id, int rank) {
  return stack.Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank)).text;
}

// The "BYO <json>" lines of a log whose "what" is `what`.
std::vector<json> ByoLines(const std::string& log, const std::string& what) {
  std::vector<json> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("BYO {");
    if (at == std::string::npos) continue;
    json j = json::parse(line.substr(at + 4), nullptr, false);
    if (j.is_object() && j.value("what", "") == what) out.push_back(std::move(j));
  }
  return out;
}

// The `what` line of each node's log (rank 0, then 1), waiting for the worker node's log to
// reach the server (its next heartbeat). Empty if one is missing after 10 s.
std::vector<json> BothRanks(LocalStack& stack, int64_t id, const std::string& what) {
  for (int i = 0; i < 100; ++i) {
    std::vector<json> out;
    for (int rank = 0; rank < 2; ++rank) {
      auto lines = ByoLines(Log(stack, id, rank), what);
      if (!lines.empty()) out.push_back(lines.back());
    }
    if (out.size() == 2) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return {};
}

void Fail(LocalStack& stack, int64_t id, const json& job) {
  std::fprintf(stderr, "byo_bench: job %lld: %s\n%s\n%s\n", static_cast<long long>(id),
               job.dump(2).c_str(), Log(stack, id, 0).c_str(), Log(stack, id, 1).c_str());
}

struct InitFigures {
  std::vector<double> started_ms, imported_ms, init_ms;  // the later rank's, per run
  // init_ms - imported_ms: the rendezvous itself, without the interpreter's and torch's start
  // (which a busy machine stretches); a refused store connection shows here as a second.
  std::vector<double> rendezvous_ms;
  int failed = 0;
};

bool Init(LocalStack& stack, const Options& o, const std::string& launcher, InitFigures* f) {
  const json spec = JobSpec("init-" + launcher, o, launcher, {"init"});
  for (int run = -1; run < o.init_runs; ++run) {  // run -1 warms up
    std::this_thread::sleep_for(std::chrono::milliseconds(o.heartbeat_interval_ms * 3 / 2));
    const int64_t submit_ns = RealtimeNs();
    const int64_t id = Submit(stack, spec);
    if (id == 0) return false;
    json job = Finished(stack, id, 120);
    std::vector<json> ranks = BothRanks(stack, id, "init");
    if (job.value("state", "") != "SUCCEEDED" || ranks.size() != 2) {
      Fail(stack, id, job);
      ++f->failed;
      continue;
    }
    if (run < 0) continue;
    int64_t started = 0, imported = 0, init = 0;
    for (const json& r : ranks) {
      started = std::max(started, r["start_ns"].get<int64_t>());
      imported = std::max(imported, r["imported_ns"].get<int64_t>());
      init = std::max(init, r["init_ns"].get<int64_t>());
    }
    f->started_ms.push_back(static_cast<double>(started - submit_ns) / 1e6);
    f->imported_ms.push_back(static_cast<double>(imported - submit_ns) / 1e6);
    f->init_ms.push_back(static_cast<double>(init - submit_ns) / 1e6);
    f->rendezvous_ms.push_back(static_cast<double>(init - imported) / 1e6);
  }
  std::printf(
      "  %-8s submit -> ranks started p50 %.0f ms; torch imported p50 %.0f ms; "
      "init_process_group returned p50 %.0f ms, p90 %.0f ms, max %.0f ms; imported -> returned "
      "p50 %.0f ms, p90 %.0f ms, max %.0f ms (%zu runs, %d failed)\n",
      launcher.c_str(), Percentile(f->started_ms, 0.5), Percentile(f->imported_ms, 0.5),
      Percentile(f->init_ms, 0.5), Percentile(f->init_ms, 0.9), Percentile(f->init_ms, 1.0),
      Percentile(f->rendezvous_ms, 0.5), Percentile(f->rendezvous_ms, 0.9),
      Percentile(f->rendezvous_ms, 1.0), f->init_ms.size(), f->failed);
  return true;
}

bool Ddp(LocalStack& stack, const Options& o, json* out) {
  const json spec = JobSpec(
      "ddp", o, "mpirun",
      {"ddp", "--blocks", std::to_string(o.blocks), "--block-steps", std::to_string(o.block_steps),
       "--hidden", std::to_string(o.hidden), "--batch", std::to_string(o.batch)});
  const int64_t id = Submit(stack, spec);
  if (id == 0) return false;
  json job = Finished(stack, id);
  std::vector<json> ranks = BothRanks(stack, id, "ddp");
  auto overhead = ByoLines(Log(stack, id, 0), "report_overhead");
  if (job.value("state", "") != "SUCCEEDED" || ranks.size() != 2 || overhead.empty()) {
    Fail(stack, id, job);
    return false;
  }
  const json& r = overhead.back();
  const bool equal = ranks[0]["sha256"] == ranks[1]["sha256"];
  std::printf("  ddp      ranks' parameters: %s (%s, %s)\n", equal ? "bitwise equal" : "DIFFER",
              ranks[0]["sha256"].get<std::string>().substr(0, 16).c_str(),
              ranks[1]["sha256"].get<std::string>().substr(0, 16).c_str());
  std::printf(
      "  ddp      step %.2f ms without report, %.2f ms with: ratio %.4f (ABBA quads: "
      "median %.4f, min %.4f, max %.4f); rank 0's CPU per step %.2f vs %.2f ms: ratio "
      "%.4f; report() %.1f us per call\n",
      r["step_ms_off"].get<double>(), r["step_ms_on"].get<double>(), r["ratio"].get<double>(),
      r["ratio_quad_median"].get<double>(), r["ratio_quad_min"].get<double>(),
      r["ratio_quad_max"].get<double>(), r["cpu_ms_off"].get<double>(),
      r["cpu_ms_on"].get<double>(), r["cpu_ratio"].get<double>(),
      r["report_call_us"].get<double>());
  *out = r;
  (*out).erase("what");
  (*out)["ranks_bitwise_equal"] = equal;
  (*out)["sha256"] = ranks[0]["sha256"];
  return true;
}

bool Resume(LocalStack& stack, const Options& o, json* out) {
  const std::vector<std::string> args = {"resume",
                                         "--steps",
                                         "100",
                                         "--hidden",
                                         std::to_string(o.hidden),
                                         "--batch",
                                         std::to_string(o.batch)};
  const int64_t ref = Submit(stack, JobSpec("undisturbed", o, "mpirun", args));
  if (ref == 0) return false;
  json job = Finished(stack, ref);
  auto ref_lines = ByoLines(Log(stack, ref, 0), "resume");
  if (job.value("state", "") != "SUCCEEDED" || ref_lines.empty()) {
    Fail(stack, ref, job);
    return false;
  }
  std::vector<std::string> held = args;
  held.insert(held.end(), {"--hold-at", "50"});
  const int64_t low = Submit(stack, JobSpec("preempted", o, "mpirun", held));
  if (low == 0) return false;
  const std::string at = "/v1/jobs/" + std::to_string(low);
  bool holding = false;
  for (int i = 0; i < 1200 && !holding; ++i) {
    holding = Log(stack, low, 0).find("holding at step 50") != std::string::npos;
    if (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!holding) {
    Fail(stack, low, stack.Get(at).body);
    return false;
  }
  json high = {{"name", "high"},
               {"kind", "command"},
               {"priority", 95},
               {"resources", {{"nodes", 2}, {"ranks_per_node", 1}}},
               {"command", {"true"}}};
  const int64_t high_id = Submit(stack, high);
  if (high_id == 0) return false;
  Finished(stack, high_id);
  job = Finished(stack, low);
  auto lines = ByoLines(Log(stack, low, 0), "resume");
  if (job.value("state", "") != "SUCCEEDED" || lines.empty()) {
    Fail(stack, low, job);
    return false;
  }
  json events = stack.Get(at + "/events?type=state&limit=100").body["events"];
  int64_t requeued = -1;
  for (const auto& e : events) {
    if (e["data"]["to"] == "PENDING" && e["data"]["from"] == "RESTARTING") requeued = e["id"];
  }
  json ckpts = stack.Get(at + "/events?type=checkpoint&limit=100").body["events"];
  json after = requeued > 0
                   ? stack.Get(at + "/events?type=step&limit=1&after=" + std::to_string(requeued))
                         .body["events"]
                   : json::array();
  const int64_t checkpoint_step = ckpts.empty() ? -1 : ckpts[0]["data"].value("step", -1);
  const int64_t first_step = after.empty() ? -1 : after[0]["data"].value("step", -1);
  const double ref_loss = ref_lines.back()["final_loss"];
  const double loss = lines.back()["final_loss"];
  const double rel = std::abs(loss - ref_loss) / std::abs(ref_loss);
  const bool bitwise = ref_lines.back()["sha256"] == lines.back()["sha256"];
  std::printf(
      "  resume   preempted: %s; checkpoint at step %lld, resumed at step %lld; final "
      "loss %.9g vs undisturbed %.9g: %.3g%% apart, parameters %s\n",
      requeued > 0 ? "yes" : "NO", static_cast<long long>(checkpoint_step),
      static_cast<long long>(first_step), loss, ref_loss, rel * 100,
      bitwise ? "bitwise equal" : "differ");
  *out = {{"preempted", requeued > 0},          {"checkpoint_step", checkpoint_step},
          {"resumed_first_step", first_step},   {"final_loss", loss},
          {"undisturbed_final_loss", ref_loss}, {"relative_difference", rel},
          {"parameters_bitwise_equal", bitwise}};
  return requeued > 0;
}

// This process's CPU time (every thread's), in seconds.
double ProcessCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct EngineFigures {
  double samples_per_s = 0;
  double cpu_us_per_sample = 0;  // this process's CPU time over the read, per sample
};

// storage::StreamSamples over epoch 0's Partition with `threads` read-ahead threads; zeros if it
// failed.
EngineFigures EngineRead(const std::string& dir, int threads) {
  auto ds = storage::Dataset::Open(dir);
  if (!ds.ok()) {
    std::fprintf(stderr, "byo_bench: %s\n", ds.status().ToString().c_str());
    return {};
  }
  auto order = storage::Partition((*ds)->samples(), storage::PartitionSpec{});
  if (!order.ok()) return {};
  const size_t n = order->size();
  const auto t0 = SteadyClock::now();
  const double c0 = ProcessCpuSeconds();
  storage::ReadAheadOptions ro;
  ro.threads = threads;
  auto stream = storage::StreamSamples(**ds, std::move(*order), ro);
  size_t count = 0;
  for (;;) {
    auto s = stream->Next();
    if (!s.ok()) {
      std::fprintf(stderr, "byo_bench: %s\n", s.status().ToString().c_str());
      return {};
    }
    if (!s->has_value()) break;
    ++count;
  }
  const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  if (count != n || count == 0) return {};
  return {static_cast<double>(count) / secs, (ProcessCpuSeconds() - c0) * 1e6 / count};
}

// The faster of two runs.
EngineFigures Better(const EngineFigures& a, const EngineFigures& b) {
  return a.samples_per_s >= b.samples_per_s ? a : b;
}

bool Read(LocalStack& stack, const Options& o, json* out) {
  const std::string inputs = stack.dir() + "/inputs";
  fs::create_directories(inputs);
  fs::permissions(inputs, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  storage::testing::RobomimicFileSpec spec;
  spec.demos = o.demos;
  spec.frames = o.frames;
  spec.cameras = 1;
  spec.image_size = o.image;
  const std::string path = inputs + "/byo.hdf5";
  auto made = storage::testing::WriteRobomimicFile(path, spec);
  if (!made.ok()) {
    std::fprintf(stderr, "byo_bench: %s\n", made.status().ToString().c_str());
    return false;
  }
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                            fs::perms::others_read);
  HttpResult r =
      stack.Post("/v1/datasets",
                 json{{"name", "byo"}, {"source", {{"format", "hdf5"}, {"path", path}}}}.dump());
  if (r.status != 201) {
    std::fprintf(stderr, "byo_bench: import answered %d: %s\n", r.status, r.text.c_str());
    return false;
  }
  const std::string at = "/v1/datasets/" + std::to_string(r.body["id"].get<int64_t>());
  json d = json::object();
  for (int i = 0; i < 3000 && d.value("state", "importing") == "importing"; ++i) {
    d = stack.Get(at).body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (d.value("state", "") != "ready") {
    std::fprintf(stderr, "byo_bench: import: %s\n", d.dump(2).c_str());
    return false;
  }
  const std::string dir = d["path"];

  // The engine's loader here may use every core; a job's rank only what its cgroup limit (its
  // slots) and mpirun's binding allow: embody.data is read once in a 1-slot job (against the
  // engine's 1 thread) and once in a 2-slot job (against its 2 threads, the goal's baseline).
  EngineFigures e1 = EngineRead(dir, 1), e2 = EngineRead(dir, 2);
  json py[2];
  for (int slots = 1; slots <= 2; ++slots) {
    json spec_job = {
        {"name", "read-" + std::to_string(slots)},
        {"kind", "command"},
        {"resources", {{"nodes", 1}, {"ranks_per_node", 1}, {"slots_per_rank", slots}}},
        {"datasets", {"dataset:byo"}},
        {"command",
         {o.python, kScript, "read", "--dataset", "dataset:byo", "--workers",
          slots == 2 ? "2" : "0"}}};
    const int64_t id = Submit(stack, spec_job);
    if (id == 0) return false;
    json job = Finished(stack, id);
    auto lines = ByoLines(Log(stack, id, 0), "read");
    if (job.value("state", "") != "SUCCEEDED" || lines.empty()) {
      Fail(stack, id, job);
      return false;
    }
    py[slots - 1] = lines.back();
  }
  e1 = Better(e1, EngineRead(dir, 1));
  e2 = Better(e2, EngineRead(dir, 2));
  const double engine1 = e1.samples_per_s, engine2 = e2.samples_per_s;
  const double plain1 = py[0]["plain_samples_per_s"], plain2 = py[1]["plain_samples_per_s"];
  const double loader = py[1]["loader_samples_per_s"];
  auto cores = [](const json& j) {  // CPU seconds over wall seconds of the samples() pass
    return j["plain_cpu_seconds"].get<double>() / j["plain_seconds"].get<double>();
  };
  auto cpu_us = [](const json& j) {  // CPU time per sample of the samples() pass
    return j["plain_cpu_seconds"].get<double>() * 1e6 / j["plain_samples"].get<double>();
  };
  std::printf(
      "  read     %lld samples (%dx%d camera + low-dim): engine's loader %.0f samples/s "
      "(1 thread), %.0f (2 threads); embody.data samples() in a 1-slot job %.0f (%.2fx of 1 "
      "thread, %.2f cores busy), in a 2-slot job %.0f (%.2fx of 2 threads, %.2f cores busy); "
      "DataLoader 2 workers %.0f (%.2fx of 2 threads)\n",
      static_cast<long long>(py[1]["samples"].get<int64_t>()), o.image, o.image, engine1, engine2,
      plain1, plain1 / engine1, cores(py[0]), plain2, plain2 / engine2, cores(py[1]), loader,
      loader / engine2);
  std::printf(
      "           CPU per sample: engine's loader %.0f us (1 thread), %.0f us (2 threads); "
      "embody.data %.0f us (1-slot job), %.0f us (2-slot job)\n",
      e1.cpu_us_per_sample, e2.cpu_us_per_sample, cpu_us(py[0]), cpu_us(py[1]));
  *out = {{"samples", py[1]["samples"]},
          {"engine_1thread_cpu_us_per_sample", e1.cpu_us_per_sample},
          {"engine_2threads_cpu_us_per_sample", e2.cpu_us_per_sample},
          {"sdk_1slot_cpu_us_per_sample", cpu_us(py[0])},
          {"sdk_2slots_cpu_us_per_sample", cpu_us(py[1])},
          {"engine_1thread_samples_per_s", engine1},
          {"engine_2threads_samples_per_s", engine2},
          {"sdk_1slot_samples_per_s", plain1},
          {"sdk_1slot_cores_busy", cores(py[0])},
          {"sdk_1slot_limit", py[0]["cpu_limit"]},
          {"sdk_1slot_cpus_allowed", py[0]["cpus_allowed"]},
          {"sdk_2slots_samples_per_s", plain2},
          {"sdk_2slots_cores_busy", cores(py[1])},
          {"sdk_2slots_limit", py[1]["cpu_limit"]},
          {"sdk_2slots_cpus_allowed", py[1]["cpus_allowed"]},
          {"sdk_dataloader_2workers_samples_per_s", loader},
          {"sdk_1slot_over_engine_1thread", plain1 / engine1},
          {"sdk_2slots_over_engine_2threads", plain2 / engine2},
          {"sdk_dataloader_over_engine_2threads", loader / engine2}};
  return true;
}

// The parts on the 2-node stack: init, ddp, resume (those `want` names); their figures into
// `line`. False if one failed.
bool Trainers(LocalStack& stack, const Options& o, const std::function<bool(const char*)>& want,
              json* line_out) {
  json& line = *line_out;
  bool ok = true;
  if (want("init")) {
    json init = json::object();
    for (const std::string& launcher : o.launchers) {
      InitFigures f;
      ok = Init(stack, o, launcher, &f) && ok;
      init[launcher] = {{"runs", f.init_ms.size()},
                        {"failed", f.failed},
                        {"started_ms_p50", Percentile(f.started_ms, 0.5)},
                        {"imported_ms_p50", Percentile(f.imported_ms, 0.5)},
                        {"init_returned_ms_p50", Percentile(f.init_ms, 0.5)},
                        {"init_returned_ms_p90", Percentile(f.init_ms, 0.9)},
                        {"init_returned_ms_max", Percentile(f.init_ms, 1.0)},
                        {"rendezvous_ms_p50", Percentile(f.rendezvous_ms, 0.5)},
                        {"rendezvous_ms_p90", Percentile(f.rendezvous_ms, 0.9)}};
    }
    line["init"] = init;
  }
  if (want("ddp")) {
    json ddp;
    ok = Ddp(stack, o, &ddp) && ok;
    line["ddp"] = ddp;
  }
  if (want("resume")) {
    json resume;
    ok = Resume(stack, o, &resume) && ok;
    line["resume"] = resume;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("byo_bench: PyTorch command jobs on a 2-node loopback cluster vs the goals");
  app.add_option("--parts", o.parts, "init, ddp, resume, read")->delimiter(',');
  app.add_option("--job-network", o.job_network,
                 "the agents' --job-network (confined, host); default: theirs")
      ->check(CLI::IsMember({"confined", "host"}));
  app.add_option("--launchers", o.launchers, "init: mpirun, torchrun")
      ->delimiter(',')
      ->check(CLI::IsMember({"mpirun", "torchrun"}));
  app.add_option("--init-runs", o.init_runs, "timed submissions per launcher")
      ->check(CLI::Range(1, 1000));
  app.add_option("--blocks", o.blocks, "ddp: blocks of steps, a multiple of 4 (ABBA)")
      ->check(CLI::Range(4, 4000));
  app.add_option("--block-steps", o.block_steps, "ddp: steps per block")
      ->check(CLI::Range(1, 100000));
  app.add_option("--hidden", o.hidden, "the MLP's hidden width")->check(CLI::Range(1, 65536));
  app.add_option("--batch", o.batch, "samples per rank and step")->check(CLI::Range(1, 65536));
  app.add_option("--demos", o.demos, "read: episodes")->check(CLI::Range(1, 100000));
  app.add_option("--frames", o.frames, "read: frames per episode")->check(CLI::Range(2, 100000));
  app.add_option("--image", o.image, "read: the camera's side")->check(CLI::Range(8, 1024));
  app.add_option("--heartbeat-interval-ms", o.heartbeat_interval_ms, "the server's interval")
      ->check(CLI::Range(50, 600000));
  app.add_option("--python", o.python, "the jobs' interpreter (with torch)");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each part's line as it is measured
  if (o.blocks % 4 != 0) {
    std::fprintf(stderr, "byo_bench: --blocks must be a multiple of 4\n");
    return 2;
  }
  if (std::system((o.python + " -c 'import torch.distributed' >/dev/null 2>&1").c_str()) != 0) {
    std::fprintf(stderr, "byo_bench: %s cannot import torch (Debian: python3-torch)\n",
                 o.python.c_str());
    return 2;
  }
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);

  json line = {{"bench", "byo"}, {"cpus", std::thread::hardware_concurrency()}};
  auto want = [&](const char* part) {
    return std::find(o.parts.begin(), o.parts.end(), part) != o.parts.end();
  };
  bool ok = true;
  if (want("init") || want("ddp") || want("resume")) {
    // Two nodes of one slot each: a job on both nodes fills them (resume's preemption).
    LocalStack stack(2, 1);
    stack.SetHeartbeatIntervalMs(o.heartbeat_interval_ms);
    stack.AddServerFlags({"--preempt-min-priority", "90", "--preempt-grace-ms", "30000"});
    if (!o.job_network.empty()) stack.AddAgentFlags({"--job-network", o.job_network});
    if (!stack.Start()) {
      std::fprintf(stderr, "byo_bench: the stack did not start (in %s)\n", stack.dir().c_str());
      return 1;
    }
    ok = Trainers(stack, o, want, &line);
  }
  if (want("read")) {
    // One node of two slots: read's 2-slot job gets the 2 CPUs the engine's 2 threads use.
    LocalStack stack(1, 2);
    stack.SetHeartbeatIntervalMs(o.heartbeat_interval_ms);
    stack.EnableDatasetRoot();
    if (!stack.Start()) {
      std::fprintf(stderr, "byo_bench: the stack did not start (in %s)\n", stack.dir().c_str());
      return 1;
    }
    json read;
    ok = Read(stack, o, &read) && ok;
    line["read"] = read;
  }
  line["ok"] = ok;
  std::printf("%s\n", line.dump().c_str());
  return ok ? 0 : 1;
}
