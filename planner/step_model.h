// The planner's model of one data-parallel training step of the policy transformer, and of a
// run of such steps at a given number of ranks: compute, gradient all-reduce overlapped with the
// backward pass bucket by bucket, data loading, optimizer, memory per rank.
//
// It predicts; it measures nothing. Its inputs are a model shape and batch (Workload), the
// machine (Cluster: a per-rank FLOP rate, links, reader rate) and options (StepOptions). The CPU
// terms come from a calibration run on the engine (bench/planner_calibrate.sh), a GPU's from its
// published rate times an efficiency. docs/planner.md explains every term and its limits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "planner/allreduce.h"

namespace planner {

// The engine's policy transformer (engine/model/policy_transformer.h), shape only.
struct ModelShape {
  int d_model = 256;
  int layers = 4;
  int heads = 8;
  int mlp = 1024;
  int action_dim = 7;
  int action_horizon = 16;
  int vocab = 512;
  int max_positions = 512;
};

// Parameters (floats) of the engine's flat buffer, alignment gaps aside: embeddings (token,
// position, modality, patch, state, action, time), L blocks, final norm and action head.
int64_t ParamCount(const ModelShape& m);
// Training FLOPs (forward + backward = 3 × forward) of one token in a segment (sample) of
// `segment_tokens` tokens: the blocks' matrix products 2·(4C² + 2CM) per layer plus attention
// 4·s·C per layer; the embedding and head products are a rounding error and left out. The same
// count as the engine's StepFlops (engine/batches/train_batches.cc) for a batch of equal-length
// samples.
double FlopsPerToken(const ModelShape& m, double segment_tokens);

enum class Precision { kFp32, kBf16, kFp8 };
const char* PrecisionName(Precision p);

// What one step of the job processes.
struct Workload {
  ModelShape model;
  double tokens_per_sample = 88;    // mean real tokens of a sample (action chunk included)
  double segment_tokens = 88;       // attention's per-token span (mean sample length)
  double slots_per_token = 1.0;     // computed slots per real token (≥ 1: padding)
  // Per step: samples_per_rank on every rank (weak scaling: the global batch grows with the
  // ranks), unless global_samples > 0, which is split evenly over the ranks (strong scaling).
  double samples_per_rank = 46;
  double global_samples = 0;
  double epoch_samples = 0;         // 0: no epoch figure
  int64_t run_steps = 0;            // the job's own steps (run time); 0: none
};

struct ComputeModel {
  double flops_per_s = 1e9;             // sustained training FLOP/s of one rank at fp32
  // The model width C at which a rank sustains half of flops_per_s (0: every width runs at
  // flops_per_s). A step also pays per-token costs linear in C (elementwise passes, norms, the
  // edges of small matrix products) next to the products' C², so narrow models run below the
  // rate wide ones reach: rate(C) = flops_per_s · C / (C + half_rate_width).
  double half_rate_width = 0;
  double bf16_speedup = 1.0;            // ... multiplied by this at bf16
  double fp8_speedup = 1.0;             // ... or this at fp8
  double memory_bytes_per_s = 1e10;     // the optimizer's memory stream (AdamW: 32 B/param)
};

// The sustained fp32 rate of one rank on a model of width `d_model` (ComputeModel's law).
double RateAtWidth(const ComputeModel& c, int d_model);

struct Cluster {
  std::string name;
  int ranks_per_node = 1;
  ComputeModel compute;
  Link intra;                           // between ranks of one node (NVLink, shared memory)
  Link inter;                           // between nodes, per rank (a rail NIC per GPU)
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  double reader_samples_per_s = 0;      // per rank, background loader; 0: never limits
  double memory_per_rank_bytes = 0;     // 0: unknown (no fit check)
  double step_overhead_s = 0;           // per step, fixed (launches, logging)
};

struct StepOptions {
  Precision precision = Precision::kFp32;
  bool fp8_allreduce = false;           // E4M3 payload + one fp32 scale per 128 values
  double bucket_bytes = 2 << 20;        // engine default (grad_buckets.h)
  bool overlap = true;                  // buckets start during backward
};

enum class Bottleneck { kCompute, kCommunication, kData };
const char* BottleneckName(Bottleneck b);

struct MemoryEstimate {
  double params = 0, grads = 0, optimizer = 0, activations = 0, total = 0;
};

struct StepPrediction {
  int ranks = 0;
  double samples_per_rank = 0;
  double tokens_per_rank = 0;
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double compute_s = 0;                 // forward + backward + optimizer
  double allreduce_bytes = 0;           // gradient payload per rank per step
  int buckets = 0;
  double comm_s = 0;                    // all buckets' all-reduce time, back to back
  double exposed_comm_s = 0;            // what backward does not hide
  double data_s = 0;                    // loader time for the step's samples
  double step_s = 0;
  double tokens_per_s = 0;              // global real tokens per second
  double samples_per_s = 0;
  double epoch_s = 0;                   // 0 when the workload has no epoch
  double run_s = 0;                     // the job's run_steps; 0 when none
  double efficiency = 1.0;              // vs one node: per-rank throughput ratio
  Bottleneck bottleneck = Bottleneck::kCompute;
  MemoryEstimate memory;
  bool fits_memory = true;
};

common::Status ValidateCluster(const Cluster& c);
common::Status ValidateWorkload(const Workload& w);
common::Status ValidateOptions(const StepOptions& o);

// One step at `ranks` ranks (placed ranks_per_node to a node). Inputs must have passed the
// Validate* functions; ranks ≥ 1.
StepPrediction PredictStep(const Workload& w, const Cluster& c, const StepOptions& o, int ranks);

struct Plan {
  std::vector<StepPrediction> sizes;    // one per requested size, efficiency filled in
  // The largest ranks_per_node·2^k (k ≥ 0, up to kMaxPlanRanks) whose efficiency vs one node
  // is still ≥ 50%, and the first one below it (0 if none below within the bound).
  int last_efficient_ranks = 0;
  int first_inefficient_ranks = 0;
};

inline constexpr int kMaxPlanRanks = 1 << 17;
inline constexpr int kMaxPlanSizes = 32;

// Validates everything (sizes: 1..kMaxPlanRanks, at most kMaxPlanSizes of them) and predicts.
common::Result<Plan> MakePlan(const Workload& w, const Cluster& c, const StepOptions& o,
                              const std::vector<int>& sizes);

}  // namespace planner
