// policy_step_timer: times one training step (forward + backward) of the policy transformer on
// one packed batch drawn from the built-in embodied length distribution, single-threaded, and
// the Eigen GEMM ceiling of this machine measured side by side.
//
//   policy_step_timer [--rows 8] [--tokens 512] [--reps 5] [--d_model 256] [--layers 4]
//                     [--heads 8] [--mlp 1024] [--padded] [--no-ceiling] [--bf16]
// Prints a breakdown and a final JSON line.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/parse_int.h"
#include "common/time_util.h"
#include "engine/data/embodied_lengths.h"
#include "engine/data/packing.h"
#include "engine/cpu/cpu_path.h"
#include "engine/model/flow_matching.h"
#include "engine/model/linear_fast.h"
#include "engine/model/policy_transformer.h"

namespace engine {
namespace {

// CPU time of this thread: on a shared machine it leaves out the time other processes held the
// core, which wall time does not.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

struct Args {
  int rows = 8, tokens = 512, reps = 5, d_model = 256, layers = 4, heads = 8, mlp = 1024;
  bool padded = false;
  bool ceiling = true;  // --no-ceiling: skip the GEMM ceiling (slow under emulation)
  bool bf16 = false;    // --bf16: the Linear products in bfloat16 (oneDNN), as engine.precision
};

std::vector<PolicySample> DrawSamples(int n, int horizon, int action_dim, uint64_t seed) {
  data::EmbodiedLengthSampler lengths(seed);
  common::Rng rng(seed + 1);
  std::vector<PolicySample> out;
  for (int i = 0; i < n; ++i) {
    const data::SampleComposition c = lengths.Next();
    PolicySample s;
    for (int t = 0; t < c.language_tokens; ++t) s.language.push_back(rng.NextU64() % 512);
    s.frames = c.frames;
    s.cameras = c.cameras;
    s.patches_per_camera = c.patch_tokens_per_camera;
    s.patches.resize(static_cast<size_t>(c.frames) * c.cameras * c.patch_tokens_per_camera *
                     kPatchDim);
    for (float& x : s.patches) x = static_cast<float>(rng.Uniform());
    s.states.resize(static_cast<size_t>(c.frames) * kStateDim);
    for (float& x : s.states) x = static_cast<float>(rng.Normal());
    s.actions.resize(static_cast<size_t>(horizon) * action_dim);
    for (float& x : s.actions) x = static_cast<float>(rng.Uniform(-1, 1));
    DrawFlowNoise(rng, &s);
    out.push_back(std::move(s));
  }
  return out;
}

int Run(const Args& a) {
  if (a.bf16) {
    if (!Bf16ComputeSupported()) {
      std::fprintf(stderr, "--bf16: no native bfloat16 on this CPU\n");
      return 2;
    }
    SetLinearCompute(LinearCompute::kOnednnBf16);
  }
  PolicyConfig c;
  c.d_model = a.d_model;
  c.layers = a.layers;
  c.heads = a.heads;
  c.mlp = a.mlp;
  c.attention = a.padded ? AttentionKind::kPadded : AttentionKind::kVarlen;
  auto model = PolicyTransformer::Create(c);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 2;
  }
  PolicyTransformer& m = **model;
  m.Init(1);

  // Pack a generous pool, keep the first `rows` rows (best-fit decreasing fills them first).
  auto pool = DrawSamples(a.rows * a.tokens / 40, c.action_horizon, c.action_dim, 7);
  std::vector<int32_t> lengths;
  for (const auto& s : pool) lengths.push_back(s.NumTokens(c.action_horizon));
  data::PackedRows plan;
  if (a.padded) {
    plan = OneSamplePerRow(std::span(lengths).first(a.rows), a.tokens).value();
  } else {
    auto all = data::PackBestFitDecreasing(lengths, a.tokens).value();
    plan.budget = a.tokens;
    for (int r = 0; r < a.rows; ++r) {
      for (int32_t s : all.Row(r)) plan.sample_index.push_back(s);
      plan.row_begin.push_back(static_cast<int32_t>(plan.sample_index.size()));
      auto cu = all.CuSeqlens(r);
      plan.cu_seqlens.insert(plan.cu_seqlens.end(), cu.begin(), cu.end());
      plan.real_tokens += cu.back();
    }
  }
  // BuildPackedBatch wants exactly the samples the plan places, renumbered.
  std::vector<PolicySample> used;
  for (int32_t& s : plan.sample_index) {
    used.push_back(pool[s]);
    s = static_cast<int32_t>(used.size() - 1);
  }
  auto batch = BuildPackedBatch(used, plan, c.action_horizon, c.action_dim);
  if (!batch.ok()) {
    std::fprintf(stderr, "%s\n", batch.status().ToString().c_str());
    return 2;
  }
  m.Reserve(a.rows, a.tokens);
  const long real = plan.real_tokens, slots = static_cast<long>(a.rows) * a.tokens;

  double best = 1e30, total = 0.0, fwd_best = 1e30, cpu_best = 1e30;
  float loss = 0.0f;
  for (int r = 0; r < a.reps + 1; ++r) {  // one warm-up
    m.ZeroGrad();
    const double c0 = ThreadCpuSeconds();
    const double t0 = common::MonotonicSeconds();
    loss = m.Forward(*batch).value();
    const double t1 = common::MonotonicSeconds();
    if (!m.Backward().ok()) return 3;
    const double t2 = common::MonotonicSeconds();
    const double c2 = ThreadCpuSeconds();
    if (r == 0) continue;
    cpu_best = std::min(cpu_best, c2 - c0);
    best = std::min(best, t2 - t0);
    fwd_best = std::min(fwd_best, t1 - t0);
    total += t2 - t0;
  }
  const double mean = total / a.reps;
  // Matrix-product FLOPs of a step over all slots (3× forward for forward + backward);
  // attention and elementwise work excluded.
  const double C = c.d_model, Mw = c.mlp;
  const double linear_flops = 3.0 * 2.0 * slots * c.layers * (4.0 * C * C + 2.0 * C * Mw);
  const double gemm =
      a.ceiling ? MeasureGemmGflops(0.5) : 0.0;  // (4096 x 256) x (256 x 1024), same kernels
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 1) load[0] = -1;
  std::printf("policy step: %d rows x %d tokens (%ld real, %.1f%% fill), %d samples, %s\n", a.rows,
              a.tokens, real, 100.0 * real / slots, batch->num_samples(),
              a.padded ? "padded" : "varlen packed");
  std::printf("  cpu path %s, linear kernels %s, gemm %s\n", cpu::ActiveCpuPathName(),
              LinearKernelsName(), LinearComputeName(ActiveLinearCompute()));
  std::printf("  d_model %d layers %d heads %d mlp %d, %zu params, loss %.4f\n", c.d_model,
              c.layers, c.heads, c.mlp, m.layout().num_parameters(), loss);
  std::printf("  step best %.1f ms mean %.1f ms (forward best %.1f ms), %.0f real tokens/s\n",
              best * 1e3, mean * 1e3, fwd_best * 1e3, real / best);
  std::printf(
      "  step thread-CPU best %.1f ms (%.1f GFLOP/s of linear work per CPU second); "
      "load average %.2f\n",
      cpu_best * 1e3, linear_flops / cpu_best / 1e9, load[0]);
  std::printf(
      "  linear GEMM FLOPs %.2f G -> %.1f GFLOP/s useful; Eigen GEMM ceiling %.1f GFLOP/s "
      "(%.0f%%)\n",
      linear_flops / 1e9, linear_flops / best / 1e9, gemm,
      100.0 * linear_flops / best / 1e9 / gemm);
  std::printf(
      "{\"bench\":\"policy_step\",\"rows\":%d,\"tokens_per_row\":%d,\"real_tokens\":%ld,"
      "\"step_ms_best\":%.3f,\"step_ms_mean\":%.3f,\"forward_ms_best\":%.3f,"
      "\"step_cpu_ms_best\":%.3f,\"linear_gflops\":%.2f,\"gemm_ceiling_gflops\":%.2f,"
      "\"loadavg\":%.2f,\"linear_kernels\":\"%s\"}\n",
      a.rows, a.tokens, real, best * 1e3, mean * 1e3, fwd_best * 1e3, cpu_best * 1e3,
      linear_flops / best / 1e9, gemm, load[0], LinearKernelsName());
  return 0;
}

}  // namespace
}  // namespace engine

int main(int argc, char** argv) {
  engine::Args a;
  const std::pair<const char*, int*> sizes[] = {{"--rows", &a.rows},     {"--tokens", &a.tokens},
                                                {"--reps", &a.reps},     {"--d_model", &a.d_model},
                                                {"--layers", &a.layers}, {"--heads", &a.heads},
                                                {"--mlp", &a.mlp}};
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    int* size = nullptr;
    for (const auto& [flag, field] : sizes) {
      if (f == flag) size = field;
    }
    if (size != nullptr) {
      // A size is a positive integer: a missing or malformed one is a usage error, not a 0.
      auto v = common::ParseInt(i + 1 < argc ? argv[++i] : "", 1, 1 << 24, f);
      if (!v.ok()) {
        std::fprintf(stderr, "policy_step_timer: %s %s\n", f.c_str(), v.status().message().c_str());
        return 2;
      }
      *size = *v;
    } else if (f == "--padded")
      a.padded = true;
    else if (f == "--no-ceiling")
      a.ceiling = false;
    else if (f == "--bf16")
      a.bf16 = true;
    else {
      std::fprintf(
          stderr,
          "usage: policy_step_timer [--rows N] [--tokens T] [--reps R] "
          "[--d_model C] [--layers L] [--heads H] [--mlp M] [--padded] [--no-ceiling] [--bf16]\n");
      return 2;
    }
  }
  return engine::Run(a);
}
