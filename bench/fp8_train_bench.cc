// FP8 compute in training (engine.fp8.compute) vs fp32, one process: fp8_train_bench [flags].
//
// 1. Products: one Linear of the reference model's shapes (tokens × d_model → mlp, the MLP's
//    fc1) forward + backward, fp32 (the engine's LinearForwardFast/LinearBackwardFast, whatever
//    GEMM the process uses) vs FP8 (engine/model/fp8_linear.h, block and delayed scaling),
//    interleaved rep by rep; median times and the ratio.
// 2. Training: the model trained --steps steps three ways from the same seed and data: fp32,
//    FP8 with block scaling, FP8 with delayed scaling. The final loss (mean of the last 10
//    steps) and FP8's relative difference from fp32 (the goal: within 2%). Skipped with
//    --steps 0.
// 3. Step time: --time-rounds rounds of --time-steps steps of each way in turn (fp32, block,
//    delayed, fp32, ...), so a machine shared with other work loads the three alike; the
//    median over rounds of each way's mean step time. Skipped with --time-rounds 0.
// The CPU has no FP8 arithmetic: the FP8 products decode to fp32 before multiplying, so FP8 is
// slower here; what this measures is the accuracy of the recipe, and its cost on a CPU.
// Ends with one JSON line.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/model/fp8_linear.h"
#include "engine/model/linear_fast.h"
#include "engine/train/trainer.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double MeanOfLast(const std::vector<float>& v, size_t k) {
  k = std::min(k, v.size());
  double s = 0.0;
  for (size_t i = v.size() - k; i < v.size(); ++i) s += v[i];
  return k > 0 ? s / static_cast<double>(k) : 0.0;
}

double LoadAvg() {
  double l = -1.0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1.0;
    std::fclose(f);
  }
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "FP8 compute in training vs fp32: one Linear's products, and the loss after N steps"};
  int d_model = 256, layers = 4, heads = 8, mlp = 1024, rows = 2, tokens = 512, steps = 100,
      reps = 20, time_rounds = 5, time_steps = 5;
  uint64_t seed = 11;
  app.add_option("--d_model", d_model);
  app.add_option("--layers", layers);
  app.add_option("--heads", heads);
  app.add_option("--mlp", mlp);
  app.add_option("--rows", rows, "rows of --tokens tokens per step");
  app.add_option("--tokens", tokens);
  app.add_option("--steps", steps, "training steps each way (0: products only)");
  app.add_option("--reps", reps, "repetitions of the product timing");
  app.add_option("--seed", seed);
  app.add_option("--time-rounds", time_rounds, "rounds of the interleaved step timing (0: none)");
  app.add_option("--time-steps", time_steps, "steps of each way per round");
  CLI11_PARSE(app, argc, argv);

  // 1. One Linear, forward + backward.
  const int B = rows * tokens, C = d_model, OC = mlp;
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(B) * C), w(static_cast<size_t>(OC) * C), b(OC),
      dy(static_cast<size_t>(B) * OC), y(dy.size()), dx(x.size()), dw(w.size()), db(OC);
  for (auto& v : x) v = nd(gen);
  for (auto& v : w) v = 0.02f * nd(gen);
  for (auto& v : dy) v = 1e-4f * nd(gen);
  engine::Fp8Linear block({engine::Fp8Scaling::kBlock, 16});
  engine::Fp8Linear delayed({engine::Fp8Scaling::kDelayed, 16});
  std::vector<double> t32, tblock, tdelayed;
  for (int r = 0; r < reps + 1; ++r) {  // the first rep warms up, not counted
    double t0 = Now();
    engine::LinearForwardFast(y.data(), x.data(), w.data(), b.data(), B, C, OC);
    engine::LinearBackwardFast(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), B, C,
                               OC, true);
    double t1 = Now();
    block.Forward(y.data(), x.data(), w.data(), b.data(), B, C, OC);
    block.Backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), B, C, OC, true);
    double t2 = Now();
    delayed.Forward(y.data(), x.data(), w.data(), b.data(), B, C, OC);
    delayed.Backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), B, C, OC, true);
    double t3 = Now();
    if (r == 0) continue;
    t32.push_back(t1 - t0);
    tblock.push_back(t2 - t1);
    tdelayed.push_back(t3 - t2);
  }
  const double m32 = Median(t32), mblock = Median(tblock), mdelayed = Median(tdelayed);
  std::printf("Linear (%d x %d) -> %d forward + backward, %s, median of %d:\n", B, C, OC,
              engine::LinearComputeName(engine::ActiveLinearCompute()), reps);
  std::printf(
      "  fp32 %8.2f ms\n  fp8 block %8.2f ms (%.2fx fp32's time)\n"
      "  fp8 delayed %8.2f ms (%.2fx fp32's time)\n",
      m32 * 1e3, mblock * 1e3, mblock / m32, mdelayed * 1e3, mdelayed / m32);

  // 2. Training three ways.
  struct Run {
    const char* name;
    bool fp8;
    const char* scaling;
    double loss = 0.0, step_s = 0.0;
  };
  std::vector<Run> runs = {
      {"fp32", false, "block"}, {"fp8-block", true, "block"}, {"fp8-delayed", true, "delayed"}};
  auto options = [&](const Run& run, int n) {
    engine::TrainerOptions o;
    api::EngineOptions& e = o.engine;
    e.model.d_model = d_model;
    e.model.layers = layers;
    e.model.heads = heads;
    e.model.mlp = mlp;
    e.model.action_horizon = 16;
    e.data.rows_per_step = rows;
    e.data.tokens_per_row = tokens;
    e.optim.steps = n;
    e.optim.warmup_steps = std::max(1, n / 10);
    e.seed = seed;
    e.fp8.compute = run.fp8;
    if (run.fp8) e.fp8.scaling = run.scaling;
    o.print_progress = false;
    return o;
  };
  engine::LocalCommunicator comm;
  if (steps > 0) {
    for (Run& run : runs) {
      auto r = engine::Train(options(run, steps), comm, nullptr);
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", run.name, r.status().ToString().c_str());
        return 1;
      }
      run.loss = MeanOfLast(r->losses, 10);
    }
    std::printf(
        "Training d_model %d, %d layers, mlp %d, %d x %d tokens per step, %d steps, "
        "seed %llu (loss: mean of the last 10 steps):\n",
        d_model, layers, mlp, rows, tokens, steps, static_cast<unsigned long long>(seed));
    for (const Run& run : runs) {
      std::printf("  %-12s loss %.5f (%+.2f%% vs fp32)\n", run.name, run.loss,
                  100.0 * (run.loss / runs[0].loss - 1.0));
    }
  }
  // 3. Step time, the three ways in turn.
  if (time_rounds > 0) {
    std::vector<std::vector<double>> per_run(runs.size());
    for (int round = 0; round < time_rounds; ++round) {
      for (size_t i = 0; i < runs.size(); ++i) {
        auto r = engine::Train(options(runs[i], time_steps), comm, nullptr);
        if (!r.ok()) {
          std::fprintf(stderr, "%s: %s\n", runs[i].name, r.status().ToString().c_str());
          return 1;
        }
        per_run[i].push_back(r->mean_step_seconds);
      }
    }
    std::printf("Step time, %d rounds of %d steps each way in turn (median of the rounds):\n",
                time_rounds, time_steps);
    for (size_t i = 0; i < runs.size(); ++i) {
      runs[i].step_s = Median(per_run[i]);
      std::printf("  %-12s %.3f s (%.2fx fp32's)\n", runs[i].name, runs[i].step_s,
                  runs[i].step_s / runs[0].step_s);
    }
  }
  std::printf(
      "{\"bench\":\"fp8_train\",\"tokens\":%d,\"d_model\":%d,\"mlp\":%d,\"linear_fp32_ms\":%.3f,"
      "\"linear_fp8_block_ms\":%.3f,\"linear_fp8_delayed_ms\":%.3f,\"linear_fp8_block_ratio\":%.3f,"
      "\"steps\":%d,\"loss_fp32\":%.5f,\"loss_fp8_block\":%.5f,\"loss_fp8_delayed\":%.5f,"
      "\"step_s_fp32\":%.4f,\"step_s_fp8_block\":%.4f,\"step_s_fp8_delayed\":%.4f,"
      "\"loadavg\":%.2f}\n",
      B, C, OC, m32 * 1e3, mblock * 1e3, mdelayed * 1e3, mblock / m32, steps, runs[0].loss,
      runs[1].loss, runs[2].loss, runs[0].step_s, runs[1].step_s, runs[2].step_s, LoadAvg());
  return 0;
}
