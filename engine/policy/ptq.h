// Post-training quantisation of a trained policy into an FP8 checkpoint and evaluation from it:
// what `embody-engine quantize` and a job with engine.fp8.inference run (docs/fp8.md).
//
//   QuantizeToFp8Checkpoint  fp32 policy → FP8 checkpoint (engine/format/fp8_checkpoint.h), the
//   layers
//                            engine/model/policy_quant.h chooses quantised, the rest kept fp32
//   PolicyFromFp8Checkpoint  FP8 checkpoint → a policy whose Forward runs those layers through
//                            the fp8 matmul (PolicyTransformer::SetFp8Weights)
//   CompareFp8Eval           the same held-out batch through both: action MSE of each and the
//                            relative L2 distance of the fp8 policy's actions from the fp32 one's
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/format/fp8_checkpoint.h"
#include "engine/model/policy_quant.h"
#include "engine/model/policy_transformer.h"
#include "engine/policy/held_out_eval.h"

namespace engine {

// The engine options a checkpoint's config was trained with (config["engine"], validated as a
// JobSpec's engine section would be).
common::Result<api::EngineOptions> EngineOptionsFromCheckpointConfig(const nlohmann::json& config);

// The FP8 checkpoint of `model`: `config` (the training checkpoint's) plus an "fp8" section with
// the format, block size, the quantised names and their statistics. `summary` receives what
// quantising did (may be null).
common::Result<Fp8CheckpointData> QuantizeToFp8Checkpoint(const PolicyTransformer& model,
                                                          int64_t step,
                                                          const nlohmann::json& config,
                                                          const PtqOptions& options,
                                                          QuantizedPolicy* summary);

// A policy ready for inference from an FP8 checkpoint; *engine (may be null) receives the engine
// options it was trained with. Every tensor of the model's layout must be present once, with
// its shape.
common::Result<std::unique_ptr<PolicyTransformer>> PolicyFromFp8Checkpoint(
    const Fp8CheckpointData& data, api::EngineOptions* engine);

struct Fp8EvalComparison {
  EvalResult fp32;
  EvalResult fp8;
  double relative_l2 = 0.0;  // ‖a_fp8 − a_fp32‖ / ‖a_fp32‖ over every sampled action entry
  double mse_ratio = 0.0;    // fp8 action MSE / fp32 action MSE
};

// Both policies on the same held-out samples, noise included (EvaluateHeldOut).
common::Result<Fp8EvalComparison> CompareFp8Eval(PolicyTransformer& fp32, PolicyTransformer& fp8,
                                                 const api::EngineOptions& e, int num_samples);

// Fp8Stats as JSON, as step and eval events carry it.
nlohmann::json Fp8StatsJson(const fp8::Fp8Stats& stats);

}  // namespace engine
