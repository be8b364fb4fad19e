// Policy inference latency, fp32 vs FP8 weights, at batch 1, 4 and 8: the reference policy
// (d_model 256, 4 layers, 8 heads, MLP 1024, horizon 16, action_dim 7, 4 Euler steps) acting on
// a batch of `reach` observations the way closed-loop evaluation and rollouts run it
// (engine/eval: LoadEvalPolicy on a checkpoint's bytes, FlowPolicyActor::Act). Up to four modes,
// interleaved rep by rep:
//   fp32        the checkpoint as trained, its Linears on the engine's fp32 compute (oneDNN or
//               Eigen, as this process chose; the name is printed)
//   fp32 eigen  the same on Eigen, where the process's compute is not Eigen
//   fp8         the checkpoint quantised as `embody-engine quantize` does (the blocks' Linears,
//               E4M3 128 × 128 blocks) and loaded from the FP8 checkpoint's bytes; its products
//               run as inference runs them (LinearForwardMaybeFp8: the weight-only product on
//               the codes below kFp8GemmMinRows rows, the bf16 GEMM from there)
//   bf16        the fp32 checkpoint on oneDNN's bf16 compute, where the CPU runs bf16 natively
// Weights are the seeded initialisation: latency does not depend on training. --by-rows also
// times the fp8 policy's products alone at row counts from 8 to 376, three ways (the weight-only
// product on the codes, oneDNN's bf16 GEMM on the dequantised weights, fp32): the measurement
// behind kFp8GemmMinRows (engine/model/linear_fast.h). Prints the CPU, load average, median and
// best per call, ratios, and one JSON line.
//
//   fp8_policy_bench [--reps 40] [--task reach] [--by-rows]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/load_average.h"
#include "engine/format/checkpoint.h"
#include "engine/format/checkpoint_model.h"
#include "engine/eval/eval_policy.h"
#include "engine/fp8/block_quant.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/model/linear_fast.h"
#include "engine/model/policy_options.h"
#include "engine/sim/make_env.h"

namespace {

using Clock = std::chrono::steady_clock;


template <typename T>
T OrDie(common::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "fp8_policy_bench: %s: %s\n", what, r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

void OrDie(const common::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "fp8_policy_bench: %s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

struct Timing {
  double median_us, best_us;
};

// Each mode once per rep, in turn, so drift hits all alike.
std::vector<Timing> Interleaved(int reps, const std::vector<std::function<void()>>& modes) {
  std::vector<std::vector<double>> t(modes.size());
  for (const auto& m : modes) m();  // warm: primitives, scratch, caches
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < modes.size(); ++i) {
      const auto t0 = Clock::now();
      modes[i]();
      t[i].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
  }
  std::vector<Timing> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back({v[v.size() / 2], v.front()});
  }
  return out;
}

// f() with the Linear products on compute c, then `active` again.
template <typename F>
void OnCompute(engine::LinearCompute c, engine::LinearCompute active, F f) {
  engine::SetLinearCompute(c);
  f();
  engine::SetLinearCompute(active);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("policy inference latency, fp32 vs FP8 weights, at batch 1, 4, 8");
  int reps = 40;
  std::string task = "reach";
  app.add_option("--reps", reps, "timed calls per mode and batch")->check(CLI::Range(1, 100000));
  app.add_option("--task", task, "observations of this built-in task");
  bool by_rows = false;
  app.add_flag("--by-rows", by_rows, "also time the fp8 policy's products by row count");
  CLI11_PARSE(app, argc, argv);

  api::EngineOptions e;
  e.model.d_model = 256;
  e.model.layers = 4;
  e.model.heads = 8;
  e.model.mlp = 1024;
  e.model.action_horizon = 16;
  e.model.action_dim = 7;
  e.data.dataset = "sim:" + task;
  const engine::PolicyConfig config = OrDie(engine::PolicyConfigFromOptions(e), "model options");
  auto model = OrDie(engine::PolicyTransformer::Create(config), "model");
  model->Init(e.seed);
  engine::CheckpointData d;
  api::JobSpec spec;
  spec.engine = e;
  d.config = {{"engine", api::ToJson(spec)["engine"]},
              {"model", engine::ModelJson(config, model->num_params())}};
  d.params.assign(model->params(), model->params() + model->num_params());
  d.adam_m.assign(d.params.size(), 0.0f);
  d.adam_v.assign(d.params.size(), 0.0f);
  const std::string bytes = engine::EncodeCheckpoint(d);
  engine::eval::EvalPolicy p32 = OrDie(engine::eval::LoadEvalPolicy(bytes, false), "load fp32");
  engine::eval::EvalPolicy p8 = OrDie(engine::eval::LoadEvalPolicy(bytes, true), "load fp8");

  const engine::LinearCompute active = engine::ActiveLinearCompute();
  const bool eigen_too = active != engine::LinearCompute::kEigenFp32;
  const bool bf16 = engine::fp8::Bf16DotRuns(engine::fp8::Format::kE4M3);
  const bool bf16_compute = engine::Bf16ComputeSupported();
  const double load = bench::LoadAverage();
  std::printf(
      "fp8_policy_bench on %s, load average %.2f; fp32 compute %s; fp8 weight-only product %s "
      "(cpu path %s); %d Euler steps, task %s, %d reps\n\n",
      bench::CpuModel().c_str(), load, engine::LinearComputeName(active),
      bf16 ? "bf16 dot (VDPBF16PS)" : "fp32 activations", engine::cpu::ActiveCpuPathName(),
      e.model.inference_steps, task.c_str(), reps);
  nlohmann::json out = {{"bench", "fp8_policy"},
                        {"cpu", bench::CpuModel()},
                        {"load_average", load},
                        {"fp32_compute", engine::LinearComputeName(active)},
                        {"fp8_product", bf16 ? "bf16_dot" : "fp32_activations"},
                        {"cpu_path", engine::cpu::ActiveCpuPathName()},
                        {"reps", reps}};
  for (int batch : {1, 4, 8}) {
    engine::sim::EnvSpec env_spec = engine::eval::EnvFor(p32, task);
    env_spec.num_envs = batch;
    auto env = OrDie(engine::sim::MakeVecEnv(env_spec), "environment");
    env->Reset(7);
    const auto& obs = env->observations();
    // Rows of each Linear product: every token of every sample, context and action chunk.
    int rows = 0;
    for (const auto& o : obs) rows += o.NumTokens(e.model.action_horizon);
    std::vector<float> a32, a8, a16;
    std::vector<std::function<void()>> modes = {
        [&] { OrDie(p32.actor->Act(obs, 11, &a32), "fp32 act"); },
        [&] { OrDie(p8.actor->Act(obs, 11, &a8), "fp8 act"); }};
    // The fp32 checkpoint acting on another compute.
    const auto act_on = [&](engine::LinearCompute c, std::vector<float>* actions) {
      return [&, c, actions] {
        OnCompute(c, active, [&] { OrDie(p32.actor->Act(obs, 11, actions), "fp32 act"); });
      };
    };
    if (eigen_too) modes.push_back(act_on(engine::LinearCompute::kEigenFp32, &a32));
    const size_t i_bf16 = modes.size();
    if (bf16_compute) modes.push_back(act_on(engine::LinearCompute::kOnednnBf16, &a16));
    const std::vector<Timing> t = Interleaved(reps, modes);
    // How far the fp8 policy's actions are from the fp32 one's (same observations and noise).
    double num = 0, den = 0;
    for (size_t i = 0; i < a32.size(); ++i) {
      num += (static_cast<double>(a8[i]) - a32[i]) * (static_cast<double>(a8[i]) - a32[i]);
      den += static_cast<double>(a32[i]) * a32[i];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : 0.0;
    std::printf("  batch %d (%d rows a product): fp32 %8.1f us (best %8.1f)", batch, rows,
                t[0].median_us, t[0].best_us);
    if (eigen_too) {
      std::printf("  fp32 eigen %8.1f us (best %8.1f)", t[2].median_us, t[2].best_us);
    }
    std::printf("  fp8 %8.1f us (best %8.1f)  fp32/fp8 %.2fx", t[1].median_us, t[1].best_us,
                t[0].median_us / t[1].median_us);
    if (eigen_too) std::printf(", eigen/fp8 %.2fx", t[2].median_us / t[1].median_us);
    std::printf("  (actions relative L2 %.2e)\n", rel);
    if (bf16_compute) {
      std::printf("    fp32 checkpoint on bf16 compute %8.1f us (best %8.1f)  fp32/bf16 %.2fx\n",
                  t[i_bf16].median_us, t[i_bf16].best_us, t[0].median_us / t[i_bf16].median_us);
    }
    auto& j = out["batch_" + std::to_string(batch)];
    j = {{"fp32_us", t[0].median_us},
         {"fp32_best_us", t[0].best_us},
         {"fp8_us", t[1].median_us},
         {"fp8_best_us", t[1].best_us},
         {"ratio", t[0].median_us / t[1].median_us},
         {"actions_relative_l2", rel},
         {"rows", rows}};
    if (bf16_compute) {
      j["bf16_us"] = t[i_bf16].median_us;
      j["ratio_bf16"] = t[0].median_us / t[i_bf16].median_us;
    }
    if (eigen_too) {
      j["fp32_eigen_us"] = t[2].median_us;
      j["fp32_eigen_best_us"] = t[2].best_us;
      j["ratio_vs_eigen"] = t[2].median_us / t[1].median_us;
    }
  }
  if (by_rows && bf16_compute) {
    // The FP8 policy's own products at the row counts a batch gives them, three ways each.
    std::vector<const engine::fp8::Fp8Matrix*> mats;
    std::vector<std::vector<float>> deq;
    for (const auto& [name, parts] : p8.flow->fp8_weights()) {
      for (const auto& m : parts) {
        mats.push_back(&m);
        deq.emplace_back(static_cast<size_t>(m.rows) * m.cols);
        engine::fp8::Dequantize(m, deq.back().data());
      }
    }
    std::printf(
        "\nthe fp8 policy's %zu products, all in one pass, by rows (M): the weight-only product on "
        "the codes (fp8 %s), oneDNN's bf16 GEMM on the dequantised weights, and fp32 (%s) on "
        "them; medians; products from %d rows run the bf16 GEMM in inference\n",
        mats.size(), bf16 ? "bf16 dot" : "fp32 activations", engine::LinearComputeName(active),
        engine::kFp8GemmMinRows);
    for (int M : {8, 16, 24, 32, 47, 64, 94, 141, 188, 282, 376}) {
      const std::vector<float> x(static_cast<size_t>(M) * 1024, 0.5f);
      std::vector<float> y(static_cast<size_t>(M) * 1024);
      const auto dot = [&] {
        for (const auto* m : mats) {
          OrDie(engine::fp8::MatmulWeightFp8(y.data(), x.data(), M, *m, nullptr),
                "weight-only product");
        }
      };
      const auto gemm = [&](engine::LinearCompute c) {
        OnCompute(c, active, [&] {
          for (size_t i = 0; i < mats.size(); ++i) {
            engine::LinearForwardFast(y.data(), x.data(), deq[i].data(), nullptr, M,
                                      mats[i]->cols, mats[i]->rows);
          }
        });
      };
      const std::vector<Timing> t =
          Interleaved(reps, {dot, [&] { gemm(engine::LinearCompute::kOnednnBf16); },
                             [&] { gemm(active); }});
      std::printf(
          "  M %4d: codes %8.1f us  bf16 GEMM %8.1f us  fp32 %8.1f us   fp32/codes %.2fx  "
          "fp32/bf16-GEMM %.2fx\n",
          M, t[0].median_us, t[1].median_us, t[2].median_us, t[2].median_us / t[0].median_us,
          t[2].median_us / t[1].median_us);
      out["by_rows"][std::to_string(M)] = {{"codes_us", t[0].median_us},
                                           {"bf16_gemm_us", t[1].median_us},
                                           {"fp32_us", t[2].median_us}};
    }
  }
  std::printf("\n%s\n", out.dump().c_str());
  return 0;
}
