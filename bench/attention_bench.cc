// Attention benchmark: forward + backward over the built-in embodied length distribution,
// packed variable-length attention vs padded + masked attention, in one run.
//
// Samples are drawn from the embodied distribution, packed into rows of --budget tokens
// (histogram best-fit decreasing) for the varlen kernel, and cut into batches of --batch
// consecutive samples for the padded kernel, padded either to the batch's longest sample or to
// the distribution's maximum (285). All three process the same samples; each is timed over the
// whole set, repeated --reps times interleaved, best time kept.
//
// FLOP count: useful FLOPs per head per sample of S tokens = 4·S²·D forward (QKᵀ and PV),
// 2.5× that backward (five S×S×D products, two of them recomputing P), so 14·S²·D in all.
// The padded kernel computes on Tpad instead of S; its "useful" GFLOP/s counts only real work.
//
//   attention_bench [--samples N] [--budget B] [--batch B] [--heads H] [--head-dim D]
//                   [--reps R] [--seed S] [--causal 0|1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/data/embodied_lengths.h"
#include "engine/data/packing.h"
#include "engine/data/padded_batching.h"
#include "engine/kernels/attention_padded.h"
#include "engine/kernels/attention_varlen.h"

namespace {

using Clock = std::chrono::steady_clock;
using engine::kernels::AttentionWorkspace;

struct Flags {
  int samples = 512;
  int budget = 512;
  int batch = 8;
  int heads = 8;
  int head_dim = 32;
  int reps = 3;
  uint64_t seed = 1;
  bool causal = false;
};

void Check(const common::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "kernel failed: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

// Buffers for one call, reused across calls: contents are random and irrelevant to timing.
struct Tensors {
  std::vector<float> q, k, v, out, lse, dout, dq, dk, dv;
  void Resize(size_t n, size_t n_lse, std::mt19937& rng) {
    if (q.size() >= n && lse.size() >= n_lse) return;
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto* t : {&q, &k, &v, &dout}) {
      t->resize(n);
      for (float& x : *t) x = dist(rng);
    }
    for (auto* t : {&out, &dq, &dk, &dv}) t->assign(n, 0.0f);
    lse.assign(n_lse, 0.0f);
  }
};

struct Timing {
  double forward_s = 1e30, backward_s = 1e30;
  double total() const { return forward_s + backward_s; }
};

// Best of `reps` passes over `n` units (rows or batches); `run(i, &fwd_s, &bwd_s)` runs unit i's
// forward and backward and adds their times.
template <typename RunUnit>
Timing BestOf(int reps, int n, RunUnit run) {
  Timing best;
  for (int rep = 0; rep < reps; ++rep) {
    double fwd = 0, bwd = 0;
    for (int i = 0; i < n; ++i) run(i, &fwd, &bwd);
    best.forward_s = std::min(best.forward_s, fwd);
    best.backward_s = std::min(best.backward_s, bwd);
  }
  return best;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Timing TimeVarlen(const engine::data::PackedRows& rows, const Flags& f, Tensors* t,
                  AttentionWorkspace* ws) {
  return BestOf(f.reps, rows.num_rows(), [&](int r, double* fwd, double* bwd) {
    const auto cu = rows.CuSeqlens(r);
    const engine::kernels::VarlenShape shape{cu.back(), f.heads, f.head_dim, f.causal};
    const auto t0 = Clock::now();
    Check(engine::kernels::AttentionVarlenForward(t->out.data(), t->lse.data(), t->q.data(),
                                                  t->k.data(), t->v.data(), cu, shape, ws));
    const auto t1 = Clock::now();
    Check(engine::kernels::AttentionVarlenBackward(
        t->dq.data(), t->dk.data(), t->dv.data(), t->dout.data(), t->q.data(), t->k.data(),
        t->v.data(), t->out.data(), t->lse.data(), cu, shape, ws));
    const auto t2 = Clock::now();
    *fwd += Seconds(t0, t1);
    *bwd += Seconds(t1, t2);
  });
}

Timing TimePadded(const engine::data::PaddedBatches& batches, const std::vector<int32_t>& lengths,
                  const Flags& f, Tensors* t, AttentionWorkspace* ws) {
  // Key masks per batch, built once (a padded loader ships them with the batch).
  std::vector<std::vector<uint8_t>> masks(batches.num_batches());
  for (int b = 0; b < batches.num_batches(); ++b) {
    const int tpad = batches.pad_length[b];
    masks[b].assign(static_cast<size_t>(batches.BatchEnd(b) - batches.BatchBegin(b)) * tpad, 0);
    for (int s = batches.BatchBegin(b); s < batches.BatchEnd(b); ++s) {
      std::fill_n(masks[b].begin() + static_cast<size_t>(s - batches.BatchBegin(b)) * tpad,
                  lengths[s], 1);
    }
  }
  return BestOf(f.reps, batches.num_batches(), [&](int b, double* fwd, double* bwd) {
    const engine::kernels::PaddedShape shape{batches.BatchEnd(b) - batches.BatchBegin(b),
                                             batches.pad_length[b], f.heads, f.head_dim,
                                             f.causal};
    const uint8_t* mask = masks[b].data();
    const auto t0 = Clock::now();
    Check(engine::kernels::AttentionPaddedForward(t->out.data(), t->lse.data(), t->q.data(),
                                                  t->k.data(), t->v.data(), mask, shape, ws));
    const auto t1 = Clock::now();
    Check(engine::kernels::AttentionPaddedBackward(
        t->dq.data(), t->dk.data(), t->dv.data(), t->dout.data(), t->q.data(), t->k.data(),
        t->v.data(), t->out.data(), t->lse.data(), mask, shape, ws));
    const auto t2 = Clock::now();
    *fwd += Seconds(t0, t1);
    *bwd += Seconds(t1, t2);
  });
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::atol(argv[i + 1]);
    if (flag == "--samples")
      f.samples = static_cast<int>(value);
    else if (flag == "--budget")
      f.budget = static_cast<int>(value);
    else if (flag == "--batch")
      f.batch = static_cast<int>(value);
    else if (flag == "--heads")
      f.heads = static_cast<int>(value);
    else if (flag == "--head-dim")
      f.head_dim = static_cast<int>(value);
    else if (flag == "--reps")
      f.reps = static_cast<int>(value);
    else if (flag == "--seed")
      f.seed = static_cast<uint64_t>(value);
    else if (flag == "--causal")
      f.causal = value != 0;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }

  engine::data::EmbodiedLengthSampler sampler(f.seed);
  const std::vector<int32_t> lengths = engine::data::SampleLengths(sampler.Draw(f.samples));
  const int max_len = sampler.config().MaxTokens();
  auto rows = engine::data::PackBestFitDecreasingHistogram(lengths, f.budget);
  auto by_batch_max = engine::data::PadBatches(lengths, f.batch, 0);
  auto by_fixed = engine::data::PadBatches(lengths, f.batch, max_len);
  if (!rows.ok() || !by_batch_max.ok() || !by_fixed.ok()) {
    std::fprintf(stderr, "packing/padding failed\n");
    return 1;
  }

  int64_t real_tokens = 0;
  double useful_flops = 0;  // forward + backward
  for (int32_t s : lengths) {
    real_tokens += s;
    const double fwd = 4.0 * s * s * f.head_dim * f.heads;
    useful_flops += 3.5 * fwd * (f.causal ? 0.5 : 1.0);
  }
  auto computed_flops = [&](const engine::data::PaddedBatches& p) {
    double flops = 0;
    for (int b = 0; b < p.num_batches(); ++b) {
      const double t = p.pad_length[b];
      flops += 3.5 * 4.0 * t * t * f.head_dim * f.heads * (p.BatchEnd(b) - p.BatchBegin(b));
    }
    return flops;
  };

  std::mt19937 rng(7);
  Tensors tensors;
  const size_t hd = static_cast<size_t>(f.heads) * f.head_dim;
  const size_t max_tokens =
      std::max(static_cast<size_t>(f.budget), static_cast<size_t>(f.batch) * max_len);
  tensors.Resize(max_tokens * hd, max_tokens * f.heads, rng);
  AttentionWorkspace ws;

  // Warm up each path once (sizes the workspace), then time them interleaved.
  Flags once = f;
  once.reps = 1;
  TimeVarlen(*rows, once, &tensors, &ws);
  Timing varlen, padded_max, padded_fixed;
  for (int rep = 0; rep < f.reps; ++rep) {
    auto v = TimeVarlen(*rows, once, &tensors, &ws);
    auto pm = TimePadded(*by_batch_max, lengths, once, &tensors, &ws);
    auto pf = TimePadded(*by_fixed, lengths, once, &tensors, &ws);
    auto keep = [](Timing* best, const Timing& t) {
      if (t.total() < best->total()) *best = t;
    };
    keep(&varlen, v);
    keep(&padded_max, pm);
    keep(&padded_fixed, pf);
  }

  std::printf(
      "attention fwd+bwd: %d samples (mean %.1f tokens), H=%d D=%d%s, best of %d\n"
      "  varlen: %d rows of %d (packing efficiency %.2f%%); padded: batches of %d\n",
      f.samples, static_cast<double>(real_tokens) / f.samples, f.heads, f.head_dim,
      f.causal ? " causal" : "", f.reps, rows->num_rows(), f.budget, 100 * rows->Efficiency(),
      f.batch);
  std::printf("  %-22s %9s %9s %9s %12s %10s %10s %8s\n", "path", "fwd ms", "bwd ms", "total ms",
              "real tok/s", "useful GF/s", "padding", "vs varlen");
  auto line = [&](const char* name, const Timing& t, double padding) {
    std::printf("  %-22s %9.1f %9.1f %9.1f %12.0f %10.2f %9.1f%% %7.2fx\n", name, 1e3 * t.forward_s,
                1e3 * t.backward_s, 1e3 * t.total(), real_tokens / t.total(),
                useful_flops / t.total() * 1e-9, 100 * padding, t.total() / varlen.total());
  };
  line("varlen (packed)", varlen, 1.0 - rows->Efficiency());
  line("padded to batch max", padded_max, by_batch_max->PaddingRatio());
  line("padded to 285", padded_fixed, by_fixed->PaddingRatio());
  const double varlen_fwd_gflops = useful_flops / 3.5 / varlen.forward_s * 1e-9;
  const double varlen_bwd_gflops = useful_flops * 2.5 / 3.5 / varlen.backward_s * 1e-9;
  std::printf(
      "  varlen GFLOP/s: forward %.2f, backward %.2f; padded-285 computes %.1fx the "
      "useful FLOPs at %.2f GFLOP/s\n",
      varlen_fwd_gflops, varlen_bwd_gflops, computed_flops(*by_fixed) / useful_flops,
      computed_flops(*by_fixed) / padded_fixed.total() * 1e-9);
  std::printf(
      "{\"bench\":\"attention\",\"samples\":%d,\"heads\":%d,\"head_dim\":%d,\"causal\":%s,"
      "\"budget\":%d,\"batch\":%d,\"real_tokens\":%lld,\"packing_efficiency\":%.6f,"
      "\"varlen_fwd_ms\":%.3f,\"varlen_bwd_ms\":%.3f,\"padded_max_fwd_ms\":%.3f,"
      "\"padded_max_bwd_ms\":%.3f,\"padded_fixed_fwd_ms\":%.3f,\"padded_fixed_bwd_ms\":%.3f,"
      "\"padding_ratio_max\":%.6f,\"padding_ratio_fixed\":%.6f,\"varlen_tokens_per_s\":%.1f,"
      "\"padded_max_tokens_per_s\":%.1f,\"padded_fixed_tokens_per_s\":%.1f,"
      "\"speedup_vs_padded_max\":%.4f,\"speedup_vs_padded_fixed\":%.4f,"
      "\"varlen_fwd_gflops\":%.3f,\"varlen_bwd_gflops\":%.3f,\"varlen_gflops\":%.3f}\n",
      f.samples, f.heads, f.head_dim, f.causal ? "true" : "false", f.budget, f.batch,
      static_cast<long long>(real_tokens), rows->Efficiency(), 1e3 * varlen.forward_s,
      1e3 * varlen.backward_s, 1e3 * padded_max.forward_s, 1e3 * padded_max.backward_s,
      1e3 * padded_fixed.forward_s, 1e3 * padded_fixed.backward_s, by_batch_max->PaddingRatio(),
      by_fixed->PaddingRatio(), real_tokens / varlen.total(), real_tokens / padded_max.total(),
      real_tokens / padded_fixed.total(), padded_max.total() / varlen.total(),
      padded_fixed.total() / varlen.total(), varlen_fwd_gflops, varlen_bwd_gflops,
      useful_flops / varlen.total() * 1e-9);
  return 0;
}
