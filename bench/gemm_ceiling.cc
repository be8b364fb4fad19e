// GEMM ceiling: this machine's float32 matrix-multiply throughput (GFLOP/s) for the reference
// policy transformer's Linear layers (bench/gemm_shapes.h), on one core and on two, with Eigen 3.4
// (what the engine uses; OpenMP for two threads) and with PyTorch's BLAS (Debian python3-torch →
// OpenBLAS) run side by side by bench/gemm_ceiling_torch.py. The ceiling for a C++ training step's
// GEMM time is the best of them; the "mix" row is one forward+backward of the three layers
// (total FLOPs / total time), the number a training step's GEMMs can at best reach.
//
//   gemm_ceiling [--tokens 4096] [--min-seconds 0.25] [--reps 3] [--torch 1|0]
//
// Each case: operands filled with random values, one warm-up call, then calls repeated until
// --min-seconds have passed, best of --reps such timings. Ends with one JSON line.
#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <nlohmann/json.hpp>

#include "bench/gemm_shapes.h"
#include "bench/load_average.h"

namespace {

using Clock = std::chrono::steady_clock;
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Flags {
  int tokens = 4096;
  double min_seconds = 0.25;
  int reps = 3;
  bool torch = true;
};

// Seconds per call of `fn`, best of reps timings of ≥ min_seconds each.
template <typename Fn>
double SecondsPerCall(const Flags& f, Fn fn) {
  fn();  // warm-up: page in operands, let Eigen/OpenMP spin up its threads
  double best = 1e30;
  for (int r = 0; r < f.reps; ++r) {
    int calls = 0;
    const auto t0 = Clock::now();
    double s = 0.0;
    do {
      fn();
      ++calls;
      s = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (s < f.min_seconds);
    best = std::min(best, s / calls);
  }
  return best;
}

double EigenGflops(const Flags& f, const bench::GemmCase& g, int threads) {
  Eigen::setNbThreads(threads);
  RowMatrix x = RowMatrix::Random(g.B, g.C), w = RowMatrix::Random(g.OC, g.C);
  RowMatrix y = RowMatrix::Random(g.B, g.OC);
  RowMatrix out;
  double s = 0.0;
  switch (g.form) {
    case bench::GemmForm::kForward:
      out.resize(g.B, g.OC);
      s = SecondsPerCall(f, [&] { out.noalias() = x * w.transpose(); });
      break;
    case bench::GemmForm::kBackwardIn:
      out.resize(g.B, g.C);
      s = SecondsPerCall(f, [&] { out.noalias() = y * w; });
      break;
    case bench::GemmForm::kBackwardW:
      out.resize(g.OC, g.C);
      s = SecondsPerCall(f, [&] { out.noalias() = y.transpose() * x; });
      break;
  }
  return g.Flops() / s * 1e-9;
}

// Runs the PyTorch side; returns its JSON line (empty object if it could not run).
nlohmann::json RunTorch(const Flags& f) {
  // OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set on this machine for other work; unset them
  // for this command only, so OpenBLAS picks its kernel for the real CPU (reported back).
  const std::string cmd = std::string("env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ") +
                          "/usr/bin/python3 " EMBODY_BENCH_DIR "/gemm_ceiling_torch.py --tokens " +
                          std::to_string(f.tokens) + " --min-seconds " +
                          std::to_string(f.min_seconds) + " --reps " + std::to_string(f.reps);
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return nlohmann::json::object();
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe.get())) out.append(buf.data(), n);
  // The JSON line is the last line that starts with '{'.
  std::string line;
  for (size_t pos = 0; pos < out.size();) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    if (out[pos] == '{') line = out.substr(pos, end - pos);
    pos = end + 1;
  }
  try {
    return nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_ceiling: torch side gave no JSON line: %s\n%s\n", e.what(),
                 out.c_str());
    return nlohmann::json::object();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokens") {
      f.tokens = std::atoi(argv[i + 1]);
    } else if (flag == "--min-seconds") {
      f.min_seconds = std::atof(argv[i + 1]);
    } else if (flag == "--reps") {
      f.reps = std::atoi(argv[i + 1]);
    } else if (flag == "--torch") {
      f.torch = std::atoi(argv[i + 1]) != 0;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
#ifdef _OPENMP
  const bool eigen_openmp = true;
#else
  const bool eigen_openmp = false;
#endif
  const std::vector<bench::GemmCase> cases = bench::ModelGemms(f.tokens);
  const double load_start = bench::LoadAverage();
  std::printf(
      "gemm_ceiling: %zu GEMMs of the policy transformer at %d tokens; Eigen %d.%d.%d "
      "(OpenMP %s, SIMD %s)\n",
      cases.size(), f.tokens, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
      eigen_openmp ? "on" : "off", Eigen::SimdInstructionSetsInUse());
  std::fflush(stdout);

  // GFLOP/s per (backend, threads) per case.
  std::map<std::string, std::vector<double>> gflops;
  const std::vector<int> threads = eigen_openmp ? std::vector<int>{1, 2} : std::vector<int>{1};
  for (int t : threads) {
    auto& col = gflops["eigen_t" + std::to_string(t)];
    for (const auto& g : cases) col.push_back(EigenGflops(f, g, t));
  }
  nlohmann::json torch = f.torch ? RunTorch(f) : nlohmann::json::object();
  for (int t : {1, 2}) {
    const std::string key = "torch_t" + std::to_string(t);
    if (!torch.contains(key)) continue;
    auto& col = gflops[key];
    for (const auto& g : cases) col.push_back(torch[key].value(g.name, 0.0));
  }

  // Table.
  std::printf("\n%-16s %-22s", "gemm", "shape");
  for (const auto& [k, v] : gflops) std::printf(" %10s", k.c_str());
  std::printf(" %10s\n", "best");
  std::vector<double> best(cases.size(), 0.0);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::printf("%-16s %-22s", cases[i].name.c_str(), cases[i].Shape().c_str());
    for (const auto& [k, v] : gflops) {
      std::printf(" %10.1f", v[i]);
      best[i] = std::max(best[i], v[i]);
    }
    std::printf(" %10.1f\n", best[i]);
  }
  // The mix: total FLOPs over total time, per backend and for the best-per-case ceiling.
  double total_flops = 0.0;
  for (const auto& g : cases) total_flops += g.Flops();
  auto mix = [&](const std::vector<double>& col) {
    double seconds = 0.0;
    for (size_t i = 0; i < cases.size(); ++i) seconds += cases[i].Flops() / (col[i] * 1e9);
    return total_flops / seconds * 1e-9;
  };
  nlohmann::json summary;
  std::printf("%-16s %-22s", "mix (fwd+bwd)", "");
  for (const auto& [k, v] : gflops) {
    summary[k] = mix(v);
    std::printf(" %10.1f", mix(v));
  }
  summary["best"] = mix(best);
  std::printf(" %10.1f\n", mix(best));

  // Side-by-side ratios.
  auto ratio = [&](const char* a, const char* b) {
    if (!summary.contains(a) || !summary.contains(b)) return;
    std::printf("ratio %s / %s (mix): %.2fx\n", a, b,
                summary[a].get<double>() / summary[b].get<double>());
  };
  std::printf("\n");
  ratio("eigen_t2", "eigen_t1");
  ratio("torch_t2", "torch_t1");
  ratio("eigen_t1", "torch_t1");
  ratio("eigen_t2", "torch_t2");
  if (torch.contains("openblas")) {
    std::printf("torch BLAS: %s\n", torch["openblas"].dump().c_str());
  }

  const double load_end = bench::LoadAverage();
  std::printf("load average (1 min): %.2f at start, %.2f at end, on %d cores\n", load_start,
              load_end, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  nlohmann::json line = {{"bench", "gemm_ceiling"},      {"loadavg_start", load_start},
                         {"loadavg_end", load_end},      {"tokens", f.tokens},
                         {"eigen_openmp", eigen_openmp}, {"mix_gflops", summary}};
  for (const auto& [k, v] : gflops) {
    for (size_t i = 0; i < cases.size(); ++i) line["gflops"][k][cases[i].name] = v[i];
  }
  if (torch.contains("openblas")) line["torch_blas"] = torch["openblas"];
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
