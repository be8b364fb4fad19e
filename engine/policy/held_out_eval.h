// Closed-loop assessment of a trained policy: sample action chunks with the flow-matching
// sampler (PolicyTransformer::SampleActions, Euler steps) on held-out demonstrations of the
// built-in task and compare them with the expert's.
//
// Held-out samples come from the same task and length distribution as training but from global
// indices training never reaches (kHeldOutFirstSample onward), with the same per-sample rules
// (engine/batches/train_batches.h), so the figure measures generalisation to new goals and states.
#pragma once

#include <cstdint>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/model/policy_transformer.h"
#include "engine/sim/reach_task.h"

namespace engine {

inline constexpr uint64_t kHeldOutFirstSample = uint64_t{1} << 62;

struct EvalResult {
  int samples = 0;
  int euler_steps = 0;
  double action_mse = 0.0;       // mean over every action entry of (sampled − expert)²
  double zero_action_mse = 0.0;  // the same for always predicting 0: the scale to compare with
  std::vector<float> actions;    // the sampled chunks, (samples · horizon, action_dim)
};

// Runs `num_samples` held-out samples through the model in one batch laid out as training lays
// it out (e.options' packing and tokens_per_row), with e.model.inference_steps Euler steps.
common::Result<EvalResult> EvaluateHeldOut(PolicyTransformer& model, const DemoSource& task,
                                           const api::EngineOptions& e, int num_samples);

}  // namespace engine
