// gemm_backends_bench: the engine's Linear products on the reference policy's GEMM shapes
// (bench/gemm_shapes.h) through each LinearCompute (engine/model/linear_fast.h), side by side in
// one run, single-threaded as one engine rank runs them:
//   eigen-fp32   Eigen, the copy compiled for this CPU's widest ISA (the engine's default)
//   onednn-fp32  oneDNN matmul in float32 (Debian libdnnl; its kernels chosen at run time)
//   onednn-bf16  oneDNN matmul with bfloat16 operands, float32 accumulation and output
// Each layer is timed as the engine calls it: "fwd" is Y = X·Wᵀ + b (bias fused), "bwd" is
// dX = dY·W and dW += dYᵀ·X (one LinearBackwardFast call, dX written, dW accumulated). bf16 times
// include rounding the operands to bfloat16. "mix" is all rows' FLOPs over all rows' time. Times
// are the thread's CPU time (the machines this runs on are shared).
//
//   gemm_backends_bench [--tokens 4096] [--min-seconds 0.25] [--reps 3]
//
// Ends with one JSON line.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/gemm_shapes.h"
#include "bench/load_average.h"
#include "engine/cpu/cpu_path.h"
#include "engine/model/linear_fast.h"

namespace {

using engine::LinearCompute;

constexpr LinearCompute kComputes[] = {LinearCompute::kEigenFp32, LinearCompute::kOnednnFp32,
                                       LinearCompute::kOnednnBf16};
constexpr int kNumComputes = 3;

struct Flags {
  int tokens = 4096;
  double min_seconds = 0.25;
  int reps = 3;
};

// This thread's CPU time: every product runs on the calling thread, and on a shared machine
// wall time also counts the time the core ran other processes.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Thread-CPU seconds per call of `fn`, best of reps timings of ≥ min_seconds each, after one
// warm-up call (which also builds oneDNN's primitive for the shape).
template <typename Fn>
double SecondsPerCall(const Flags& f, Fn fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < f.reps; ++r) {
    int calls = 0;
    const double t0 = ThreadSeconds();
    double s = 0.0;
    do {
      fn();
      ++calls;
      s = ThreadSeconds() - t0;
    } while (s < f.min_seconds);
    best = std::min(best, s / calls);
  }
  return best;
}

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

struct Layer {
  std::string name;
  int C, OC;
};

// The distinct Linear layers of gemm_shapes.h (its fwd entries).
std::vector<Layer> Layers(int tokens) {
  std::vector<Layer> out;
  for (const bench::GemmCase& g : bench::ModelGemms(tokens)) {
    if (g.form == bench::GemmForm::kForward) {
      out.push_back({g.name.substr(0, g.name.find('.')), g.C, g.OC});
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"The Linear layer's GEMMs: Eigen fp32 vs oneDNN fp32 vs oneDNN bf16"};
  app.add_option("--tokens", f.tokens, "rows of each product (packed tokens)")->check(
      CLI::Range(1, 1 << 16));
  app.add_option("--min-seconds", f.min_seconds, "seconds per timing")->check(
      CLI::Range(0.001, 60.0));
  app.add_option("--reps", f.reps, "timings per case, best kept")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  const dnnl_version_t* v = dnnl::version();
  const bool bf16_native = engine::Bf16ComputeSupported();
  const double load_start = bench::LoadAverage();
  std::printf(
      "gemm_backends_bench: %d tokens, 1 thread; Eigen kernels %s (cpu path %s); oneDNN "
      "%d.%d.%d, bf16 %s\n\n",
      f.tokens, engine::LinearKernelsName(), engine::cpu::ActiveCpuPathName(), v->major, v->minor,
      v->patch, bf16_native ? "native (AVX512_BF16/AMX)" : "EMULATED (no AVX512_BF16/AMX)");
  std::printf("%-14s %-22s %12s %12s %12s %10s %10s\n", "case", "product", "eigen-fp32",
              "onednn-fp32", "onednn-bf16", "dnn/eigen", "bf16/eigen");

  std::mt19937 rng(1);
  nlohmann::json rows = nlohmann::json::array();
  double total_flops = 0.0, total_seconds[kNumComputes] = {};
  for (const Layer& l : Layers(f.tokens)) {
    const int B = f.tokens;
    const std::vector<float> x = Random(size_t(B) * l.C, rng), w = Random(size_t(l.OC) * l.C, rng),
                             b = Random(l.OC, rng), dy = Random(size_t(B) * l.OC, rng);
    std::vector<float> y(size_t(B) * l.OC), dx(size_t(B) * l.C), dw(size_t(l.OC) * l.C);
    for (const bool backward : {false, true}) {
      const double flops = (backward ? 4.0 : 2.0) * B * l.C * l.OC;
      double gflops[kNumComputes];
      for (int c = 0; c < kNumComputes; ++c) {
        engine::SetLinearCompute(kComputes[c]);
        const double s = SecondsPerCall(f, [&] {
          if (backward) {
            engine::LinearBackwardFast(dx.data(), dw.data(), nullptr, dy.data(), x.data(),
                                       w.data(), B, l.C, l.OC, /*overwrite_dinp=*/true);
          } else {
            engine::LinearForwardFast(y.data(), x.data(), w.data(), b.data(), B, l.C, l.OC);
          }
        });
        gflops[c] = flops / s * 1e-9;
        total_seconds[c] += s;
      }
      total_flops += flops;
      const std::string name = l.name + (backward ? ".bwd" : ".fwd");
      const std::string shape = "(" + std::to_string(B) + "x" + std::to_string(l.C) + ")->" +
                                std::to_string(l.OC);
      std::printf("%-14s %-22s %12.1f %12.1f %12.1f %9.2fx %9.2fx\n", name.c_str(), shape.c_str(),
                  gflops[0], gflops[1], gflops[2], gflops[1] / gflops[0], gflops[2] / gflops[0]);
      rows.push_back({{"case", name},
                      {"B", B},
                      {"C", l.C},
                      {"OC", l.OC},
                      {"eigen_fp32_gflops", gflops[0]},
                      {"onednn_fp32_gflops", gflops[1]},
                      {"onednn_bf16_gflops", gflops[2]}});
    }
  }
  double mix[kNumComputes];
  for (int c = 0; c < kNumComputes; ++c) mix[c] = total_flops / total_seconds[c] * 1e-9;
  std::printf("%-14s %-22s %12.1f %12.1f %12.1f %9.2fx %9.2fx\n", "mix", "fwd+bwd, all layers",
              mix[0], mix[1], mix[2], mix[1] / mix[0], mix[2] / mix[0]);
  const double load_end = bench::LoadAverage();
  std::printf("\nload average %.2f at start, %.2f at end\n", load_start, load_end);
  nlohmann::json out = {{"bench", "gemm_backends"},
                        {"tokens", f.tokens},
                        {"eigen_kernels", engine::LinearKernelsName()},
                        {"onednn_version", std::to_string(v->major) + "." +
                                               std::to_string(v->minor) + "." +
                                               std::to_string(v->patch)},
                        {"bf16_native", bf16_native},
                        {"rows", rows},
                        {"mix_eigen_fp32_gflops", mix[0]},
                        {"mix_onednn_fp32_gflops", mix[1]},
                        {"mix_onednn_bf16_gflops", mix[2]},
                        {"onednn_fp32_over_eigen", mix[1] / mix[0]},
                        {"onednn_bf16_over_eigen", mix[2] / mix[0]},
                        {"load_start", load_start},
                        {"load_end", load_end}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
