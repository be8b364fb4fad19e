// TrainStep: one optimisation step of data-parallel training, the same on every rank.
//
// A step takes the loader's next batch (the ranks agree that every one of them got its batch),
// starts a small all-reduce of the step's global figures (real tokens, slots, useful FLOPs, and
// whether any rank was asked to stop), runs forward, then backward with the bucketed gradient
// all-reduce overlapped (engine/dist/grad_buckets.h: each layer's gradients go out as backward
// reports them final, in reverse layer order), and applies AdamW with the scheduled learning rate
// to the global per-token mean gradient. Parameters start identical and so stay bitwise
// identical on every rank. What it did comes back as StepStats (step_stats.h) with the figures
// the run's totals need.
//
// Not its business: which step to run or when to stop (the trainer's loop), events, printing,
// checkpoints.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/data/loader.h"
#include "engine/dist/communicator.h"
#include "engine/dist/fp8_allreduce.h"
#include "engine/dist/grad_buckets.h"
#include "engine/model/policy_transformer.h"
#include "engine/optim/adamw.h"
#include "engine/train/step_stats.h"
#include "engine/batches/train_batches.h"

namespace engine {

struct TrainStepOptions {
  api::OptimOptions optim;       // the learning-rate schedule
  int64_t samples_per_step = 0;  // global, over all ranks
  size_t grad_bucket_bytes = size_t{2} << 20;
  Fp8Allreduce* fp8_allreduce = nullptr;  // engine.fp8.allreduce; null: fp32 buckets
  double gemm_gflops = 0.0;  // the GEMM rate summed over ranks; 0: StepStats without mfu
  // Read once per step; the ranks learn in the same step whether any saw it set.
  const std::atomic<bool>* stop_requested = nullptr;
};

// What a step leaves besides its StepStats.
struct StepOutcome {
  StepStats stats;
  double real_tokens = 0.0;     // global
  double slots = 0.0;           // global
  uint64_t next_sample = 0;     // the data position after the step's samples
  bool stop_requested = false;  // some rank was asked to stop (the same on every rank)
};

class TrainStep {
 public:
  // model, adam, comm and options.fp8_allreduce outlive the TrainStep.
  TrainStep(PolicyTransformer& model, AdamW& adam, Communicator& comm, TrainStepOptions options);
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Collective: runs 0-based step `step` of a run of `steps` on the loader's next batch. Errors:
  // this rank's batch could not be loaded (that rank's error; the others failed_precondition),
  // the model refused it (this rank only), a non-finite loss (internal, every rank).
  // *failed_on_every_rank says which of these it was.
  common::Result<StepOutcome> Run(int step, int steps, data::Loader<TrainBatch>& loader,
                                  bool* failed_on_every_rank);

 private:
  PolicyTransformer& model_;
  AdamW& adam_;
  Communicator& comm_;
  TrainStepOptions options_;
  GradBuckets buckets_;
  BackwardHooks hooks_;
};

}  // namespace engine
