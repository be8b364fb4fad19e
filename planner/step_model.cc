#include "planner/step_model.h"

#include <algorithm>
#include <cmath>

namespace planner {

using common::InvalidArgument;
using common::Status;

namespace {

// Engine constants (engine/model/policy_layers.h): 8×8×3 patches, 16-wide state, 64 time
// features, 4 modality embeddings.
constexpr int64_t kPatchDim = 192, kStateDim = 16, kTimeFeatures = 64, kModalities = 4;
// Values per fp32 scale of the FP8 all-reduce (engine/fp8: 1×128 tiles).
constexpr double kFp8BlockValues = 128.0;
// Activation floats kept per token per block for backward: ln1, qkv, attention out, mid, ln2
// (C each, qkv 3C), fc1 pre-activation and GELU output (M each): 8C + 2M.
double ActivationValuesPerTokenPerLayer(const ModelShape& m) {
  return 8.0 * m.d_model + 2.0 * m.mlp;
}

Status Positive(double v, const char* field, double hi = 1e300) {
  if (!std::isfinite(v) || v <= 0 || v > hi) return InvalidArgument("must be positive", field);
  return Status::Ok();
}
Status NonNegative(double v, const char* field, double hi = 1e300) {
  if (!std::isfinite(v) || v < 0 || v > hi) return InvalidArgument("must be ≥ 0", field);
  return Status::Ok();
}

}  // namespace

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
  }
  return "fp32";
}

const char* BottleneckName(Bottleneck b) {
  switch (b) {
    case Bottleneck::kCompute: return "compute";
    case Bottleneck::kCommunication: return "communication";
    case Bottleneck::kData: return "data";
  }
  return "compute";
}

double RateAtWidth(const ComputeModel& c, int d_model) {
  const double width = d_model;
  return c.flops_per_s * width / (width + c.half_rate_width);
}

int64_t ParamCount(const ModelShape& m) {
  const int64_t C = m.d_model, M = m.mlp, A = m.action_dim;
  const int64_t embed = m.vocab * C + m.max_positions * C + kModalities * C + (kPatchDim + 1) * C +
                        (kStateDim + 1) * C + (A + 1) * C + (kTimeFeatures + 1) * C;
  const int64_t block = C + (3 * C * C + 3 * C) + (C * C + C) + C + (M * C + M) + (C * M + C);
  return embed + m.layers * block + C + (A * C + A);
}

double FlopsPerToken(const ModelShape& m, double segment_tokens) {
  const double C = m.d_model, M = m.mlp;
  const double forward = m.layers * (2.0 * (4.0 * C * C + 2.0 * C * M) + 4.0 * segment_tokens * C);
  return 3.0 * forward;
}

Status ValidateCluster(const Cluster& c) {
  if (c.ranks_per_node < 1 || c.ranks_per_node > 1024) {
    return InvalidArgument("must be between 1 and 1024", "cluster.ranks_per_node");
  }
  EMBODY_RETURN_IF_ERROR(Positive(c.compute.flops_per_s, "cluster.compute.flops_per_s", 1e18));
  EMBODY_RETURN_IF_ERROR(
      NonNegative(c.compute.half_rate_width, "cluster.compute.half_rate_width", 1e6));
  EMBODY_RETURN_IF_ERROR(Positive(c.compute.bf16_speedup, "cluster.compute.bf16_speedup", 1e3));
  EMBODY_RETURN_IF_ERROR(Positive(c.compute.fp8_speedup, "cluster.compute.fp8_speedup", 1e3));
  EMBODY_RETURN_IF_ERROR(
      Positive(c.compute.memory_bytes_per_s, "cluster.compute.memory_bytes_per_s", 1e16));
  EMBODY_RETURN_IF_ERROR(NonNegative(c.intra.latency_s, "cluster.intra.latency_s", 10));
  EMBODY_RETURN_IF_ERROR(Positive(c.intra.bytes_per_s, "cluster.intra.bytes_per_s", 1e16));
  EMBODY_RETURN_IF_ERROR(NonNegative(c.inter.latency_s, "cluster.inter.latency_s", 10));
  EMBODY_RETURN_IF_ERROR(Positive(c.inter.bytes_per_s, "cluster.inter.bytes_per_s", 1e16));
  EMBODY_RETURN_IF_ERROR(
      NonNegative(c.reader_samples_per_s, "cluster.reader_samples_per_s", 1e12));
  EMBODY_RETURN_IF_ERROR(
      NonNegative(c.memory_per_rank_bytes, "cluster.memory_per_rank_bytes", 1e15));
  EMBODY_RETURN_IF_ERROR(NonNegative(c.step_overhead_s, "cluster.step_overhead_s", 3600));
  return Status::Ok();
}

Status ValidateWorkload(const Workload& w) {
  const ModelShape& m = w.model;
  if (m.d_model < 1 || m.layers < 1 || m.heads < 1 || m.mlp < 1 || m.action_dim < 1 ||
      m.action_horizon < 1 || m.d_model > 65536 || m.layers > 4096 || m.mlp > 1 << 20) {
    return InvalidArgument("model shape out of range", "job.engine.model");
  }
  EMBODY_RETURN_IF_ERROR(Positive(w.tokens_per_sample, "workload.tokens_per_sample", 1e7));
  EMBODY_RETURN_IF_ERROR(Positive(w.segment_tokens, "workload.segment_tokens", 1e7));
  if (!(w.slots_per_token >= 1.0 && w.slots_per_token <= 1e3)) {
    return InvalidArgument("must be between 1 and 1000", "workload.slots_per_token");
  }
  EMBODY_RETURN_IF_ERROR(Positive(w.samples_per_rank, "workload.samples_per_rank", 1e9));
  EMBODY_RETURN_IF_ERROR(NonNegative(w.global_samples, "workload.global_samples", 1e12));
  EMBODY_RETURN_IF_ERROR(NonNegative(w.epoch_samples, "workload.epoch_samples", 1e15));
  if (w.run_steps < 0) return InvalidArgument("must be ≥ 0", "workload.run_steps");
  return Status::Ok();
}

Status ValidateOptions(const StepOptions& o) {
  // Below 64 KiB a bucket is all latency; the bound also keeps the bucket loop short.
  if (!std::isfinite(o.bucket_bytes) || o.bucket_bytes < 65536 || o.bucket_bytes > 1e12) {
    return InvalidArgument("must be between 65536 and 1e12", "options.bucket_bytes");
  }
  return Status::Ok();
}

StepPrediction PredictStep(const Workload& w, const Cluster& c, const StepOptions& o, int ranks) {
  StepPrediction p;
  p.ranks = ranks;
  p.samples_per_rank = w.global_samples > 0 ? w.global_samples / ranks : w.samples_per_rank;
  p.tokens_per_rank = p.samples_per_rank * w.tokens_per_sample;

  // Compute: FLOPs of the computed slots (padding included) at the precision's rate for the
  // model's width; backward does twice the forward's products.
  double rate = RateAtWidth(c.compute, w.model.d_model);
  if (o.precision == Precision::kBf16) rate *= c.compute.bf16_speedup;
  if (o.precision == Precision::kFp8) rate *= c.compute.fp8_speedup;
  const double flops = p.tokens_per_rank * w.slots_per_token * FlopsPerToken(w.model, w.segment_tokens);
  const double params = static_cast<double>(ParamCount(w.model));
  p.forward_s = flops / 3.0 / rate;
  p.backward_s = 2.0 * flops / 3.0 / rate;
  // AdamW reads parameter, gradient and both moments and writes three of them: 28 B/param at
  // fp32, rounded up to 32 for the weight-decay and clipping passes.
  p.optimizer_s = 32.0 * params / c.compute.memory_bytes_per_s;
  p.compute_s = p.forward_s + p.backward_s + p.optimizer_s;

  // Gradient all-reduce, bucket by bucket. Gradients are reduced at the compute precision (fp32
  // for fp32, bf16 otherwise: an fp8 step keeps bf16 gradients), or as E4M3 with block scales.
  const double grad_value_bytes = o.precision == Precision::kFp32 ? 4.0 : 2.0;
  p.allreduce_bytes = o.fp8_allreduce ? params * (1.0 + 4.0 / kFp8BlockValues)
                                      : params * grad_value_bytes;
  const double full_buckets = std::floor(p.allreduce_bytes / o.bucket_bytes);
  const double tail = p.allreduce_bytes - full_buckets * o.bucket_bytes;
  p.buckets = static_cast<int>(full_buckets) + (tail > 0 ? 1 : 0);
  auto bucket_time = [&](double bytes) {
    return AllreduceSeconds(c.algorithm, bytes, ranks, c.ranks_per_node, c.intra, c.inter);
  };
  const double t_full = bucket_time(o.bucket_bytes), t_tail = tail > 0 ? bucket_time(tail) : 0;
  p.comm_s = full_buckets * t_full + t_tail;
  if (ranks > 1 && o.overlap) {
    // Backward finishes gradients at an even rate in reverse parameter order; bucket k can start
    // once its last byte is final and the previous bucket is done (one collective at a time, as
    // on one NCCL stream or MPI progressed from one thread): end_k = max(end_{k−1}, ready_k) +
    // t_k. Unrolled, the last full bucket ends at max_j (ready_j + (F − j)·t_full); ready_j is
    // linear in j, so the maximum is at j = 0 or j = F − 1. Closed form, because a large model
    // in small buckets has millions of them. The tail bucket is ready when backward ends.
    double end = 0.0;
    if (full_buckets > 0) {
      const double per_bucket = p.backward_s * o.bucket_bytes / p.allreduce_bytes;
      end = std::max(per_bucket + full_buckets * t_full, full_buckets * per_bucket + t_full);
    }
    if (tail > 0) end = std::max(end, p.backward_s) + t_tail;
    p.exposed_comm_s = std::max(0.0, end - p.backward_s);
  } else {
    p.exposed_comm_s = p.comm_s;
  }

  // Data: the loader runs ahead in the background, so it costs time only when it is slower
  // than everything else of the step.
  p.data_s = c.reader_samples_per_s > 0 ? p.samples_per_rank / c.reader_samples_per_s : 0.0;
  const double train_s = p.compute_s + p.exposed_comm_s + c.step_overhead_s;
  p.step_s = std::max(train_s, p.data_s);

  const double global_samples = p.samples_per_rank * ranks;
  p.samples_per_s = global_samples / p.step_s;
  p.tokens_per_s = p.samples_per_s * w.tokens_per_sample;
  if (w.epoch_samples > 0) p.epoch_s = w.epoch_samples / p.samples_per_s;
  p.run_s = static_cast<double>(w.run_steps) * p.step_s;

  if (p.data_s >= std::max(p.compute_s, p.comm_s)) {
    p.bottleneck = Bottleneck::kData;
  } else if (p.comm_s > p.compute_s) {
    p.bottleneck = Bottleneck::kCommunication;
  } else {
    p.bottleneck = Bottleneck::kCompute;
  }

  // Memory: fp32 master weights (plus a low-precision copy), gradients at their reduce width
  // (plus the FP8 all-reduce's fp32 error-feedback residual), AdamW's two fp32 moments, and the
  // activations backward keeps.
  MemoryEstimate& m = p.memory;
  m.params = params * (4.0 + (o.precision == Precision::kFp32 ? 0.0 : 2.0));
  m.grads = params * (grad_value_bytes + (o.fp8_allreduce ? 4.0 : 0.0));
  m.optimizer = params * 8.0;
  m.activations = p.tokens_per_rank * w.slots_per_token * w.model.layers *
                  ActivationValuesPerTokenPerLayer(w.model) *
                  (o.precision == Precision::kFp32 ? 4.0 : 2.0);
  m.total = m.params + m.grads + m.optimizer + m.activations;
  p.fits_memory = c.memory_per_rank_bytes <= 0 || m.total <= c.memory_per_rank_bytes;
  return p;
}

common::Result<Plan> MakePlan(const Workload& w, const Cluster& c, const StepOptions& o,
                              const std::vector<int>& sizes) {
  EMBODY_RETURN_IF_ERROR(ValidateCluster(c));
  EMBODY_RETURN_IF_ERROR(ValidateWorkload(w));
  EMBODY_RETURN_IF_ERROR(ValidateOptions(o));
  if (sizes.empty() || sizes.size() > static_cast<size_t>(kMaxPlanSizes)) {
    return InvalidArgument("must list 1 to " + std::to_string(kMaxPlanSizes) + " sizes", "gpus");
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1 || sizes[i] > kMaxPlanRanks) {
      return InvalidArgument("must be between 1 and " + std::to_string(kMaxPlanRanks),
                             "gpus[" + std::to_string(i) + "]");
    }
    if (w.global_samples > 0 && sizes[i] > w.global_samples) {
      return InvalidArgument("more ranks than samples in the global batch",
                             "gpus[" + std::to_string(i) + "]");
    }
  }
  // Efficiency is per-rank throughput against one full node's; with a fixed global batch that
  // is the epoch-time ratio scaled by the ranks.
  const StepPrediction node = PredictStep(w, c, o, c.ranks_per_node);
  const double node_rate = node.samples_per_s / c.ranks_per_node;
  auto efficiency = [&](const StepPrediction& s) {
    return s.samples_per_s / s.ranks / node_rate;
  };
  Plan plan;
  for (int n : sizes) {
    StepPrediction s = PredictStep(w, c, o, n);
    s.efficiency = efficiency(s);
    plan.sizes.push_back(s);
  }
  for (int64_t n = c.ranks_per_node; n <= kMaxPlanRanks; n *= 2) {
    const double e = efficiency(PredictStep(w, c, o, static_cast<int>(n)));
    if (e < 0.5) {
      plan.first_inefficient_ranks = static_cast<int>(n);
      break;
    }
    plan.last_efficient_ranks = static_cast<int>(n);
  }
  return plan;
}

}  // namespace planner
