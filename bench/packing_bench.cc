// Packing benchmark: packs 1M samples of the built-in embodied length distribution into rows of
// 512 tokens with the exact and the histogram best-fit-decreasing packers, and compares the
// packing efficiency with padding to a fixed length and to each batch's longest sample.
//
//   packing_bench [--samples N] [--budget B] [--reps R] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/data/embodied_lengths.h"
#include "engine/data/packing.h"
#include "engine/data/padded_batching.h"

namespace {

using engine::data::PackedRows;
using Clock = std::chrono::steady_clock;

template <typename Packer>
double BestMillis(int reps, Packer pack, PackedRows* result) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    auto packed = pack();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!packed.ok()) {
      std::fprintf(stderr, "packing failed: %s\n", packed.status().ToString().c_str());
      std::exit(1);
    }
    best = std::min(best, ms);
    *result = std::move(packed).value();
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 1000000, budget = 512, reps = 5;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::atol(argv[i + 1]);
    if (flag == "--samples")
      samples = static_cast<int>(value);
    else if (flag == "--budget")
      budget = static_cast<int>(value);
    else if (flag == "--reps")
      reps = static_cast<int>(value);
    else if (flag == "--seed")
      seed = static_cast<uint64_t>(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  engine::data::EmbodiedLengthSampler sampler(seed);
  const auto lengths = engine::data::SampleLengths(sampler.Draw(samples));
  double mean = 0;
  for (int32_t l : lengths) mean += l;
  mean /= std::max(1, samples);

  PackedRows exact, hist;
  const double exact_ms = BestMillis(
      reps, [&] { return engine::data::PackBestFitDecreasing(lengths, budget); }, &exact);
  const double hist_ms = BestMillis(
      reps, [&] { return engine::data::PackBestFitDecreasingHistogram(lengths, budget); }, &hist);
  if (!engine::data::ValidatePacking(hist, lengths).ok() ||
      !engine::data::ValidatePacking(exact, lengths).ok()) {
    std::fprintf(stderr, "invalid packing\n");
    return 1;
  }
  auto fixed = engine::data::PadBatches(lengths, 8, sampler.config().MaxTokens());
  auto own = engine::data::PadBatches(lengths, 8, 0);

  std::printf("samples %d, mean length %.1f, budget %d (best of %d)\n", samples, mean, budget,
              reps);
  std::printf("  exact BFD      %8.2f ms  rows %d  efficiency %.4f%%\n", exact_ms, exact.num_rows(),
              100 * exact.Efficiency());
  std::printf("  histogram BFD  %8.2f ms  rows %d  efficiency %.4f%%  (%.1fx faster)\n", hist_ms,
              hist.num_rows(), 100 * hist.Efficiency(), exact_ms / hist_ms);
  std::printf("  padded to %d: padding %.2f%%; padded to batch max (batch 8): padding %.2f%%\n",
              sampler.config().MaxTokens(), 100 * fixed->PaddingRatio(), 100 * own->PaddingRatio());
  std::printf(
      "{\"bench\":\"packing\",\"samples\":%d,\"budget\":%d,\"mean_length\":%.2f,"
      "\"exact_ms\":%.3f,\"histogram_ms\":%.3f,\"exact_rows\":%d,\"histogram_rows\":%d,"
      "\"exact_efficiency\":%.6f,\"histogram_efficiency\":%.6f,\"padding_ratio_fixed\":%.6f,"
      "\"padding_ratio_batch_max\":%.6f}\n",
      samples, budget, mean, exact_ms, hist_ms, exact.num_rows(), hist.num_rows(),
      exact.Efficiency(), hist.Efficiency(), fixed->PaddingRatio(), own->PaddingRatio());
  return 0;
}
