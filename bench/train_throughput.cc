// train_throughput: training throughput of the real trainer (engine::Train: background loader,
// policy transformer, bucketed token-weighted all-reduce, AdamW), in REAL tokens per second, for
// the packed + varlen layout and the padded baseline on the same samples, measured side by side
// in one run. Run it alone (1 rank) or under mpirun (each rank trains its slice of every step).
//
//   train_throughput [--mode both|packed|padded|compute] [--rows 8] [--tokens 512] [--steps 8]
//                    [--warmup 2] [--d_model 256] [--layers 4] [--heads 8] [--mlp 1024]
//                    [--horizon 16] [--seed 1]
//
// packed  engine.data.packing true, attention varlen: each rank's samples of a step packed
//         best-fit decreasing into rows of --tokens (about --rows rows);
// padded  packing false, attention padded: the same samples (rows_per_step = the packed run's
//         samples per rank), one per row, each row padded to the step's longest sample.
// compute  the packed run three times, its Linear products by Eigen fp32, oneDNN fp32
//          (EMBODY_GEMM=eigen / onednn) and engine.precision "bf16" (oneDNN, bf16 operands, fp32
//          accumulation): step time and loss side by side (engine/model/linear_fast.h), in
//          --rounds 2 alternating rounds, each keeping its fastest round's figures. Compared by
//          the main thread's CPU time per step (whole run / steps, warm-up included, no GEMM-rate
//          probe), which a loaded machine distorts less than wall time; wall medians beside.
// Figures are medians over the --steps steps after --warmup, from the trainer's own step events
// (global real tokens / step seconds). The ideal packed/padded ratio is padded slots / real tokens
// (what removing every padding slot would give); the achieved share of it is the ratio / ideal.
// The last line is JSON.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/dist/mpi_communicator.h"
#include "engine/model/linear_fast.h"
#include "engine/report/recording_sink.h"
#include "engine/batches/train_batches.h"
#include "engine/train/step_stats.h"
#include "engine/train/trainer.h"

namespace {

struct Args {
  std::string mode = "both";
  std::string precision = "fp32";  // engine.precision of each run
  int rounds = 2;                  // --mode compute: alternating rounds
  int rows = 8, tokens = 512, steps = 8, warmup = 2;
  int d_model = 256, layers = 4, heads = 8, mlp = 1024, horizon = 16;
  uint64_t seed = 1;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Figures {
  double tokens_per_s = 0, step_seconds = 0, padding_ratio = 0, mfu = 0, gemm_gflops = 0;
  double forward = 0, backward = 0, allreduce = 0, optimizer = 0, data_wait = 0;
  int samples_per_rank = 0;
  double final_loss = 0;
  // --mode compute: this thread's CPU seconds for the whole run / steps run (warm-up included).
  double cpu_step_seconds = 0;
};

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

engine::TrainerOptions Options(const Args& a, bool packed) {
  engine::TrainerOptions o;
  api::EngineOptions& e = o.engine;
  e.model.d_model = a.d_model;
  e.model.layers = a.layers;
  e.model.heads = a.heads;
  e.model.mlp = a.mlp;
  e.model.action_horizon = a.horizon;
  e.data.tokens_per_row = a.tokens;
  e.data.rows_per_step = a.rows;
  e.data.packing = packed;
  e.attention = packed ? "varlen" : "padded";
  e.optim.steps = a.warmup + a.steps;
  e.optim.warmup_steps = 1;
  e.optim.lr = 1e-3;
  e.seed = a.seed;
  e.precision = a.precision;
  o.print_progress = false;
  o.measure_gemm_ceiling = true;
  if (!packed) {
    // The packed run's samples, one per row.
    api::EngineOptions p = e;
    p.data.packing = true;
    e.data.rows_per_step = engine::SamplesPerRank(p);
  }
  return o;
}

bool Run(const Args& a, bool packed, engine::Communicator& comm, Figures* f) {
  engine::TrainerOptions o = Options(a, packed);
  engine::RecordingSink sink;
  // --mode compute leaves out the GEMM-rate probe, so the thread's CPU time is the steps'.
  if (a.mode == "compute") o.measure_gemm_ceiling = false;
  const double cpu0 = ThreadCpuSeconds();
  auto r = engine::Train(o, comm, &sink);
  f->cpu_step_seconds = (ThreadCpuSeconds() - cpu0) / o.engine.optim.steps;
  if (!r.ok()) {
    std::fprintf(stderr, "train_throughput: %s\n", r.status().ToString().c_str());
    return false;
  }
  f->samples_per_rank = engine::SamplesPerRank(o.engine);
  f->gemm_gflops = r->gemm_gflops;
  f->final_loss = r->losses.empty() ? 0.0 : r->losses.back();
  std::vector<double> tps, sec, pad, mfu, fwd, bwd, ar, opt, wait;
  for (const auto& e : sink.events()) {
    if (e["type"] != "step") continue;
    auto s = engine::StepStats::FromJson(e);
    if (!s.ok()) {
      std::fprintf(stderr, "train_throughput: %s\n", s.status().ToString().c_str());
      return false;
    }
    if (s->step <= a.warmup) continue;
    tps.push_back(s->tokens_per_s);
    sec.push_back(s->step_seconds);
    pad.push_back(s->padding_ratio);
    mfu.push_back(s->mfu.value_or(0.0));
    fwd.push_back(s->forward_seconds);
    bwd.push_back(s->backward_seconds);
    ar.push_back(s->allreduce_seconds);
    opt.push_back(s->optimizer_seconds);
    wait.push_back(s->data_wait_seconds);
  }
  f->tokens_per_s = Median(tps);
  f->step_seconds = Median(sec);
  f->mfu = Median(mfu);
  f->forward = Median(fwd);
  f->backward = Median(bwd);
  f->allreduce = Median(ar);
  f->optimizer = Median(opt);
  f->data_wait = Median(wait);
  // Mean over the timed steps: the slots the layout computed per real token.
  double s = 0.0;
  for (double p : pad) s += p;
  f->padding_ratio = pad.empty() ? 0.0 : s / pad.size();
  return true;
}

void Print(const char* name, const Figures& f) {
  std::printf(
      "%-7s %6d samples/rank  real tokens/s %9.0f  step %7.1f ms (data wait %.1f, fwd %.1f, bwd "
      "%.1f, allreduce wait %.1f, optim %.1f)  padding %5.1f%%  mfu %.1f%% of %.0f GFLOP/s\n",
      name, f.samples_per_rank, f.tokens_per_s, f.step_seconds * 1e3, f.data_wait * 1e3,
      f.forward * 1e3, f.backward * 1e3, f.allreduce * 1e3, f.optimizer * 1e3,
      100 * f.padding_ratio, 100 * f.mfu, f.gemm_gflops);
}

nlohmann::json ToJson(const Figures& f) {
  return {{"real_tokens_per_s", f.tokens_per_s},    {"step_seconds", f.step_seconds},
          {"padding_ratio", f.padding_ratio},       {"mfu", f.mfu},
          {"useful_gflops", f.mfu * f.gemm_gflops}, {"samples_per_rank", f.samples_per_rank},
          {"forward_seconds", f.forward},           {"backward_seconds", f.backward},
          {"allreduce_wait_seconds", f.allreduce},  {"optimizer_seconds", f.optimizer},
          {"data_wait_seconds", f.data_wait},       {"final_loss", f.final_loss}};
}

// --mode compute: the packed run under each LinearCompute, side by side; 0 or 1.
int CompareComputes(Args a, engine::Communicator& comm, bool leader, double load_start) {
  struct Case {
    const char* name;
    const char* gemm_env;  // EMBODY_GEMM for the fp32 runs
    const char* precision;
  };
  const Case cases[] = {{"eigen-fp32", "eigen", "fp32"},
                        {"onednn-fp32", "onednn", "fp32"},
                        {"onednn-bf16", "eigen", "bf16"}};
  // Rounds alternate the three (a shared machine's load drifts); each keeps its fastest round.
  Figures f[3];
  for (int round = 0; round < a.rounds; ++round) {
    for (int i = 0; i < 3; ++i) {
      setenv("EMBODY_GEMM", cases[i].gemm_env, 1);
      a.precision = cases[i].precision;
      Figures r;
      if (!Run(a, true, comm, &r)) return 1;
      if (round == 0 || r.cpu_step_seconds < f[i].cpu_step_seconds) f[i] = r;
    }
  }
  if (!leader) return 0;
  std::printf("bf16 native on this CPU: %s\n", engine::Bf16ComputeSupported() ? "yes" : "NO");
  nlohmann::json j = {{"bench", "train_throughput"}, {"mode", "compute"},
                      {"world_size", comm.world_size()}, {"d_model", a.d_model},
                      {"layers", a.layers}, {"heads", a.heads}, {"mlp", a.mlp},
                      {"rows", a.rows}, {"tokens_per_row", a.tokens}, {"steps", a.steps}, {"rounds", a.rounds},
                      {"bf16_native", engine::Bf16ComputeSupported()},
                      {"loadavg_start", load_start}};
  for (int i = 0; i < 3; ++i) {
    Print(cases[i].name, f[i]);
    std::printf("%12s final loss %.5f\n", "", f[i].final_loss);
    j[cases[i].name] = ToJson(f[i]);
  }
  // Ratios of the main thread's CPU time per step (the steps run on it; a shared machine's wall
  // time also counts other processes), and of the median wall step beside them.
  const double base = f[0].cpu_step_seconds;
  std::printf(
      "step thread-CPU ms: eigen-fp32 %.1f, onednn-fp32 %.1f, onednn-bf16 %.1f\n"
      "eigen-fp32 / onednn-fp32: %.2fx; eigen-fp32 / onednn-bf16: %.2fx; onednn-fp32 / "
      "onednn-bf16: %.2fx (wall medians: %.2fx, %.2fx, %.2fx); final loss bf16 vs eigen-fp32 "
      "%+.2f%%\n",
      1e3 * f[0].cpu_step_seconds, 1e3 * f[1].cpu_step_seconds, 1e3 * f[2].cpu_step_seconds,
      base / f[1].cpu_step_seconds, base / f[2].cpu_step_seconds,
      f[1].cpu_step_seconds / f[2].cpu_step_seconds, f[0].step_seconds / f[1].step_seconds,
      f[0].step_seconds / f[2].step_seconds, f[1].step_seconds / f[2].step_seconds,
      100.0 * (f[2].final_loss - f[0].final_loss) / f[0].final_loss);
  for (int i = 0; i < 3; ++i) j[cases[i].name]["cpu_step_seconds"] = f[i].cpu_step_seconds;
  j["speedup_onednn_fp32"] = base / f[1].cpu_step_seconds;
  j["speedup_bf16_vs_eigen"] = base / f[2].cpu_step_seconds;
  j["speedup_bf16_vs_onednn_fp32"] = f[1].cpu_step_seconds / f[2].cpu_step_seconds;
  double load[3] = {-1, -1, -1};
  getloadavg(load, 3);
  j["loadavg_end"] = load[0];
  std::printf("load average at end %.2f\n%s\n", load[0], j.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (f == "--mode" && i + 1 < argc) {
      a.mode = argv[++i];
    } else if (f == "--rows") {
      a.rows = next();
    } else if (f == "--tokens") {
      a.tokens = next();
    } else if (f == "--steps") {
      a.steps = next();
    } else if (f == "--warmup") {
      a.warmup = next();
    } else if (f == "--d_model") {
      a.d_model = next();
    } else if (f == "--layers") {
      a.layers = next();
    } else if (f == "--heads") {
      a.heads = next();
    } else if (f == "--mlp") {
      a.mlp = next();
    } else if (f == "--horizon") {
      a.horizon = next();
    } else if (f == "--rounds") {
      a.rounds = std::max(1, next());
    } else if (f == "--seed") {
      a.seed = static_cast<uint64_t>(next());
    } else {
      std::fprintf(stderr, "train_throughput: unknown flag %s\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
  }
  int code = 0;
  {
    engine::MpiCommunicator comm;
    const bool leader = comm.rank() == 0;
    double load[3] = {-1, -1, -1};
    getloadavg(load, 3);
    const bool do_packed = a.mode != "padded", do_padded = a.mode != "packed";
    Figures packed, padded;
    if (leader) {
      std::printf(
          "train_throughput: %d rank(s); model d_model %d, %d layers, %d heads, mlp %d, horizon "
          "%d; %d warm-up + %d timed steps; load average %.2f\n",
          comm.world_size(), a.d_model, a.layers, a.heads, a.mlp, a.horizon, a.warmup, a.steps,
          load[0]);
    }
    if (a.mode == "compute") {
      code = CompareComputes(a, comm, leader, load[0]);
      MPI_Finalize();
      return code;
    }
    if (do_packed && !Run(a, true, comm, &packed)) code = 1;
    if (code == 0 && do_padded && !Run(a, false, comm, &padded)) code = 1;
    if (code == 0 && leader) {
      nlohmann::json j = {{"bench", "train_throughput"},
                          {"world_size", comm.world_size()},
                          {"d_model", a.d_model},
                          {"layers", a.layers},
                          {"heads", a.heads},
                          {"mlp", a.mlp},
                          {"rows", a.rows},
                          {"tokens_per_row", a.tokens},
                          {"steps", a.steps},
                          {"loadavg_start", load[0]}};
      if (do_packed) {
        Print("packed", packed);
        j["packed"] = ToJson(packed);
        j["gemm_gflops"] = packed.gemm_gflops;
      }
      if (do_padded) {
        Print("padded", padded);
        j["padded"] = ToJson(padded);
      }
      if (do_packed && do_padded && padded.tokens_per_s > 0) {
        const double ratio = packed.tokens_per_s / padded.tokens_per_s;
        const double ideal = 1.0 / (1.0 - padded.padding_ratio);  // padded slots / real tokens
        std::printf(
            "packed+varlen / padded: %.2fx real tokens/s; ideal (padded slots / real tokens) "
            "%.2fx; achieved %.0f%% of ideal\n",
            ratio, ideal, 100.0 * ratio / ideal);
        j["ratio"] = ratio;
        j["ideal_ratio"] = ideal;
        j["share_of_ideal"] = ratio / ideal;
      }
      getloadavg(load, 3);
      j["loadavg_end"] = load[0];
      std::printf("load average at end %.2f\n%s\n", load[0], j.dump().c_str());
    }
  }
  MPI_Finalize();
  return code;
}
