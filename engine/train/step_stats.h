// StepStats: what one training step did, in the one form every reader gets: the step event rank
// 0 posts (docs/contracts.md, "Agent <-> job"), the progress line it prints, and the benchmarks
// that read the events back (FromJson). A field added here reaches all three.
//
// Timings are this rank's (rank 0's in events); token, sample and padding figures are global,
// over all ranks. The step event may carry more fields than these: evaluation during training
// (engine/eval/periodic_eval.h) adds its own to the step it ran after, and FromJson ignores them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/fp8/block_quant.h"

namespace engine {

struct StepStats {
  int64_t step = 0;   // 1-based: steps done after this one
  int64_t steps = 0;  // the run's total
  double loss = 0.0;  // global per-token mean loss
  double lr = 0.0;
  double grad_norm = 0.0;          // L2 norm of the global gradient, before the update
  double tokens_per_s = 0.0;       // global real tokens / step_seconds
  double samples_per_s = 0.0;      // global samples / step_seconds
  double step_seconds = 0.0;       // the five phases below, end to end
  double data_wait_seconds = 0.0;  // waiting for the loader, and agreeing that it delivered
  double forward_seconds = 0.0;
  double backward_seconds = 0.0;
  double allreduce_seconds = 0.0;  // what the gradient all-reduce left after backward
  double optimizer_seconds = 0.0;
  double padding_ratio = 0.0;       // padding slots / slots
  double packing_efficiency = 1.0;  // real tokens / slots (1 - padding_ratio; 1 without slots)
  int64_t world_size = 1;
  // Bytes this rank sent for the gradients, and what fp32 would have sent (world_size > 1).
  std::optional<uint64_t> grad_wire_bytes;
  std::optional<uint64_t> grad_wire_bytes_fp32;
  // engine.fp8.allreduce: what quantising the gradients did this step.
  std::optional<fp8::Fp8Stats> fp8_allreduce;
  // engine.fp8.compute: this rank's quantised operands this step, E4M3 (activations and weights)
  // and E5M2 (output gradients).
  std::optional<fp8::Fp8Stats> fp8_compute_e4m3;
  std::optional<fp8::Fp8Stats> fp8_compute_e5m2;
  // Useful FLOPs per second / the measured GEMM rate (TrainerOptions::measure_gemm_ceiling).
  std::optional<double> mfu;

  // The step event: {"type":"step", every field above by its name; optional ones when set}.
  nlohmann::json ToJson() const;
  // A step event back (its extra fields ignored); invalid_argument naming a missing or mistyped
  // field.
  static common::Result<StepStats> FromJson(const nlohmann::json& event);
  // "step 3/6 loss 1.0729 lr 1.20e-03 grad_norm 0.513 step 12.3 ms tokens/s 7.9e+04 samples/s
  // 1.06e+03 padding 3.1%", without a newline.
  std::string ProgressLine() const;
};

}  // namespace engine
