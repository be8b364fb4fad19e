// FP8 benchmark: codec throughput per CPU path, weight bytes, and the linear layers of the
// reference policy (d_model 256, MLP 1024, 4 layers: qkv 256→768, proj 256→256, fc1 256→1024,
// fc2 1024→256) run three ways, each pair interleaved rep by rep in one run:
//   fp32         the engine's own Linear (LinearForwardFast: oneDNN or Eigen, as the engine
//                runs it in this process; the name is printed)
//   fp8 weights  MatmulWeightFp8 (fp32 activations × E4M3 weights, and the same weights in
//                E5M2, 128×128 blocks), batch 1/4/8, both products (WeightOnlyKernel kFp32, and
//                kBf16Dot where the CPU has it)
//   fp8 × fp8    MatmulFp8 at a training-sized M (E4M3 1×128 activation tiles × weights), with
//                and without quantising the activations first
// One "pass" is all 16 linear layers in a row; best of --reps passes per mode. Prints the CPU
// model, absolute times, ratios, and one JSON line at the end.
//
//   fp8_bench [--reps 30] [--train-m 4096] [--codec-mb 16] [--weight-only]
//
// --weight-only runs only the weight bytes and the weight-only products (sections 2 and 3).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/load_average.h"
#include "engine/fp8/block_quant.h"
#include "engine/fp8/codec.h"
#include "engine/cpu/cpu_path.h"
#include "engine/fp8/fp8_format.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/model/linear_fast.h"

namespace {

using Clock = std::chrono::steady_clock;
using engine::cpu::CpuPath;
using engine::fp8::Format;

struct Flags {
  int reps = 30;
  int train_m = 4096;
  int codec_mb = 16;
  bool weight_only = false;  // only the weight bytes and the weight-only products
};

void Check(const common::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "fp8_bench: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<float> Gaussian(size_t n, uint32_t seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Layer {
  const char* name;
  int in, out;  // C → OC
  std::vector<float> w, b;
  engine::fp8::Fp8Matrix wq;   // E4M3
  engine::fp8::Fp8Matrix wq5;  // E5M2
};

std::vector<Layer> ReferenceLayers() {
  std::vector<Layer> layers;
  const struct {
    const char* name;
    int in, out;
  } kinds[] = {{"qkv", 256, 768}, {"proj", 256, 256}, {"fc1", 256, 1024}, {"fc2", 1024, 256}};
  uint32_t seed = 1;
  for (int l = 0; l < 4; ++l) {
    for (const auto& k : kinds) {
      Layer layer{k.name,
                  k.in,
                  k.out,
                  Gaussian(static_cast<size_t>(k.in) * k.out, seed++, 0.02f),
                  Gaussian(k.out, seed++, 0.01f),
                  {},
                  {}};
      Check(engine::fp8::QuantizeWeights(layer.w.data(), layer.out, layer.in, Format::kE4M3,
                                         &layer.wq)
                .status());
      Check(engine::fp8::QuantizeWeights(layer.w.data(), layer.out, layer.in, Format::kE5M2,
                                         &layer.wq5)
                .status());
      layers.push_back(std::move(layer));
    }
  }
  return layers;
}

// Best-of-reps times of several modes run in turn rep by rep, so drift hits all alike.
std::vector<double> BestOfInterleaved(int reps, const std::vector<std::function<void()>>& modes) {
  std::vector<double> best(modes.size(), 1e30);
  for (const auto& m : modes) m();  // warm caches and scratch
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < modes.size(); ++i) {
      const auto t0 = Clock::now();
      modes[i]();
      best[i] = std::min(best[i], Seconds(t0));
    }
  }
  return best;
}

// Best-of-reps times of two modes run alternately, so drift hits both alike.
template <typename A, typename B>
std::pair<double, double> BestOfInterleaved(int reps, A a, B b) {
  double ta = 1e30, tb = 1e30;
  a();
  b();  // warm caches and scratch
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    a();
    ta = std::min(ta, Seconds(t0));
    t0 = Clock::now();
    b();
    tb = std::min(tb, Seconds(t0));
  }
  return {ta, tb};
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--reps") {
      flags.reps = std::max(1, next());
    } else if (a == "--train-m") {
      flags.train_m = std::max(1, next());
    } else if (a == "--codec-mb") {
      flags.codec_mb = std::max(1, next());
    } else if (a == "--weight-only") {
      flags.weight_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: fp8_bench [--reps N] [--train-m M] [--codec-mb MB] [--weight-only]\n");
      return 2;
    }
  }
  nlohmann::json out = {{"bench", "fp8"}, {"cpu", bench::CpuModel()}, {"reps", flags.reps}};
  std::printf("fp8_bench on %s; CPU paths:", bench::CpuModel().c_str());
  std::vector<std::string> paths;
  for (CpuPath p : engine::cpu::SupportedCpuPaths()) paths.push_back(engine::cpu::CpuPathName(p));
  for (const auto& p : paths) std::printf(" %s", p.c_str());
  std::printf(" (active %s)\n\n", engine::cpu::ActiveCpuPathName());
  out["paths"] = paths;
  out["active_path"] = engine::cpu::ActiveCpuPathName();

  // 1. Codec throughput per path: E4M3 encode (with counts) and decode, in floats per second.
  if (!flags.weight_only) {
    const size_t n = static_cast<size_t>(flags.codec_mb) * (1 << 20) / sizeof(float);
    const std::vector<float> x = Gaussian(n, 99, 10.0f);
    std::vector<uint8_t> codes(n);
    std::vector<float> back(n);
    std::printf("codec, E4M3, %zu floats:\n", n);
    double scalar_enc = 0, scalar_dec = 0;
    for (CpuPath p : engine::cpu::SupportedCpuPaths()) {
      engine::fp8::EncodeCounts counts;
      const auto [enc, dec] = BestOfInterleaved(
          std::max(3, flags.reps / 5),
          [&] {
            engine::fp8::EncodeFp8(Format::kE4M3, x.data(), n, codes.data(), 0.5f, &counts, p);
          },
          [&] { engine::fp8::DecodeFp8(Format::kE4M3, codes.data(), n, back.data(), 2.0f, p); });
      if (p == CpuPath::kScalar) {
        scalar_enc = enc;
        scalar_dec = dec;
      }
      const char* name = engine::cpu::CpuPathName(p);
      std::printf("  %-7s encode %7.3f Gfloat/s (%5.1fx scalar)  decode %7.3f Gfloat/s (%5.1fx)\n",
                  name, n / enc / 1e9, scalar_enc / enc, n / dec / 1e9, scalar_dec / dec);
      out["codec"][name] = {{"encode_gfloat_s", n / enc / 1e9},
                            {"decode_gfloat_s", n / dec / 1e9},
                            {"encode_vs_scalar", scalar_enc / enc},
                            {"decode_vs_scalar", scalar_dec / dec}};
    }
  }

  // 2. Weight bytes of the reference model's linear layers.
  std::vector<Layer> layers = ReferenceLayers();
  size_t fp32_bytes = 0, fp8_bytes = 0;
  for (const Layer& l : layers) {
    fp32_bytes += l.w.size() * sizeof(float);
    fp8_bytes += l.wq.Bytes();
  }
  std::printf(
      "\nweights of the 16 block linears: fp32 %zu bytes, fp8 %zu bytes (codes + scales): "
      "%.3fx smaller\n",
      fp32_bytes, fp8_bytes, static_cast<double>(fp32_bytes) / fp8_bytes);
  out["weight_bytes_fp32"] = fp32_bytes;
  out["weight_bytes_fp8"] = fp8_bytes;
  out["weight_bytes_ratio"] = static_cast<double>(fp32_bytes) / fp8_bytes;

  // 3. Weight-only at inference batch sizes, per vector path, against the engine's fp32 Linear
  // (LinearForwardFast with the compute this process chose, as fp32 inference runs it) and,
  // where that is not Eigen, against LinearForwardFast on Eigen too. fp8 runs both weight-only
  // products where the bf16 one runs (Bf16DotRuns), E4M3 and E5M2 weights. All modes
  // interleaved rep by rep.
  std::vector<CpuPath> vector_paths;
  for (CpuPath p : engine::cpu::SupportedCpuPaths()) {
    if (p != CpuPath::kScalar) vector_paths.push_back(p);
  }
  const int max_in = 1024, max_out = 1024;
  const engine::LinearCompute active = engine::ActiveLinearCompute();
  const bool eigen_too = active != engine::LinearCompute::kEigenFp32;
  out["fp32_compute"] = engine::LinearComputeName(active);
  std::printf(
      "\nall 16 linears, fp32 (LinearForwardFast: %s%s) vs fp32 x fp8 weights (E4M3, and the "
      "same weights in E5M2); fp8 = the fp32-activation product, fp8-bf16 = bf16 dot products "
      "(x rounded to bf16); ratios are fp32 time / fp8 time, and fp8 time / fp8-bf16 time:\n",
      engine::LinearComputeName(active), eigen_too ? ", and eigen-fp32" : "");
  for (int batch : {1, 4, 8}) {
    const std::vector<float> x = Gaussian(static_cast<size_t>(batch) * max_in, 7, 1.0f);
    std::vector<float> y(static_cast<size_t>(batch) * max_out);
    const auto fp32_pass = [&] {
      for (const Layer& l : layers) {
        engine::LinearForwardFast(y.data(), x.data(), l.w.data(), l.b.data(), batch, l.in, l.out);
      }
    };
    for (CpuPath p : vector_paths) {
      // Modes: fp32, [fp32 eigen], then per format the fp32-activation product and, where it
      // runs, the bf16 one.
      std::vector<std::function<void()>> modes = {fp32_pass};
      const size_t i_eigen = modes.size();
      if (eigen_too) {
        modes.push_back([&] {
          engine::SetLinearCompute(engine::LinearCompute::kEigenFp32);
          fp32_pass();
          engine::SetLinearCompute(active);
        });
      }
      struct FormatModes {
        Format format;
        bool bf16;
        size_t i_fp8, i_bf16;
      };
      std::vector<FormatModes> formats;
      for (Format f : {Format::kE4M3, Format::kE5M2}) {
        const auto fp8_pass = [&, p, f](engine::fp8::WeightOnlyKernel kernel) {
          for (const Layer& l : layers) {
            Check(engine::fp8::MatmulWeightFp8(y.data(), x.data(), batch,
                                               f == Format::kE4M3 ? l.wq : l.wq5, l.b.data(), p,
                                               kernel));
          }
        };
        FormatModes fm{f, engine::fp8::Bf16DotRuns(f, p), modes.size(), 0};
        modes.push_back([fp8_pass] { fp8_pass(engine::fp8::WeightOnlyKernel::kFp32); });
        fm.i_bf16 = modes.size();
        if (fm.bf16) {
          modes.push_back([fp8_pass] { fp8_pass(engine::fp8::WeightOnlyKernel::kBf16Dot); });
        }
        formats.push_back(fm);
      }
      const std::vector<double> t = BestOfInterleaved(flags.reps, modes);
      const char* name = engine::cpu::CpuPathName(p);
      auto& j = out["weight_only"][name]["batch_" + std::to_string(batch)];
      j = {{"fp32_us", t[0] * 1e6}};
      if (eigen_too) j["fp32_eigen_us"] = t[i_eigen] * 1e6;
      for (const FormatModes& fm : formats) {
        // E4M3's figures at the top level of the row, E5M2's under "e5m2".
        auto& jf = fm.format == Format::kE4M3 ? j : j["e5m2"];
        const double t8 = t[fm.i_fp8];
        std::printf("  batch %d, %-6s %s fp32 %7.1f us", batch, name,
                    engine::fp8::FormatName(fm.format), t[0] * 1e6);
        if (eigen_too) std::printf("  fp32 eigen %7.1f us", t[i_eigen] * 1e6);
        std::printf("  fp8 %7.1f us (%.2fx", t8 * 1e6, t[0] / t8);
        if (eigen_too) std::printf(", %.2fx eigen", t[i_eigen] / t8);
        std::printf(")");
        jf["fp8_us"] = t8 * 1e6;
        jf["ratio"] = t[0] / t8;
        if (eigen_too) jf["ratio_vs_eigen"] = t[i_eigen] / t8;
        if (fm.bf16) {
          const double tb = t[fm.i_bf16];
          std::printf("  fp8-bf16 %7.1f us (%.2fx", tb * 1e6, t[0] / tb);
          if (eigen_too) std::printf(", %.2fx eigen", t[i_eigen] / tb);
          std::printf("; %.2fx fp8)", t8 / tb);
          jf["fp8_bf16_us"] = tb * 1e6;
          jf["ratio_bf16"] = t[0] / tb;
          jf["bf16_vs_fp8"] = t8 / tb;
          if (eigen_too) jf["ratio_bf16_vs_eigen"] = t[i_eigen] / tb;
        }
        std::printf("\n");
      }
    }
  }

  // 4. fp8 x fp8 at a training-sized M.
  if (!flags.weight_only) {
    const int M = flags.train_m;
    const std::vector<float> x = Gaussian(static_cast<size_t>(M) * max_in, 8, 1.0f);
    std::vector<float> y(static_cast<size_t>(M) * max_out);
    // Activations quantised once per layer input width (the block's inputs are 256 or 1024 wide).
    engine::fp8::Fp8Matrix x256, x1024;
    Check(engine::fp8::QuantizeActivations(x.data(), M, 256, Format::kE4M3, &x256).status());
    Check(engine::fp8::QuantizeActivations(x.data(), M, 1024, Format::kE4M3, &x1024).status());
    double flops = 0;
    for (const Layer& l : layers) flops += 2.0 * M * l.in * l.out;
    std::printf("\nall 16 linears at M = %d tokens (%.2f GFLOP), fp32 vs fp8 x fp8 (E4M3):\n", M,
                flops / 1e9);
    const int reps = std::max(3, flags.reps / 6);
    for (CpuPath p : vector_paths) {
      engine::fp8::Fp8Matrix xq;
      const auto [t32, t8] = BestOfInterleaved(
          reps,
          [&] {
            for (const Layer& l : layers) {
              engine::LinearForwardFast(y.data(), x.data(), l.w.data(), l.b.data(), M, l.in, l.out);
            }
          },
          [&] {
            for (const Layer& l : layers) {
              Check(engine::fp8::MatmulFp8(y.data(), l.in == 256 ? x256 : x1024, l.wq, l.b.data(),
                                           p));
            }
          });
      const auto [t32b, t8q] = BestOfInterleaved(
          reps,
          [&] {
            for (const Layer& l : layers) {
              engine::LinearForwardFast(y.data(), x.data(), l.w.data(), l.b.data(), M, l.in, l.out);
            }
          },
          [&] {
            for (const Layer& l : layers) {
              Check(engine::fp8::QuantizeActivations(x.data(), M, l.in, Format::kE4M3, &xq, p)
                        .status());
              Check(engine::fp8::MatmulFp8(y.data(), xq, l.wq, l.b.data(), p));
            }
          });
      const double best32 = std::min(t32, t32b);
      const char* name = engine::cpu::CpuPathName(p);
      std::printf(
          "  %-6s fp32 %8.2f ms (%.1f GFLOP/s)  fp8xfp8 %8.2f ms (%.1f GFLOP/s), fp32/fp8 %.2fx;"
          " with activation quantisation %8.2f ms, fp32/fp8 %.2fx\n",
          name, best32 * 1e3, flops / best32 / 1e9, t8 * 1e3, flops / t8 / 1e9, t32 / t8, t8q * 1e3,
          t32b / t8q);
      out["fp8_x_fp8"][name] = {{"m", M},
                                {"fp32_ms", best32 * 1e3},
                                {"fp8_ms", t8 * 1e3},
                                {"ratio", t32 / t8},
                                {"fp8_with_quantise_ms", t8q * 1e3},
                                {"ratio_with_quantise", t32b / t8q}};
    }
  }
  std::printf("\n%s\n", out.dump().c_str());
  return 0;
}
