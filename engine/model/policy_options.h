// The policy transformer's configuration from a job's engine options (api/job_spec.h): the one
// place that maps JobSpec fields onto PolicyConfig, so the trainer and tools agree.
#pragma once

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/model/policy_transformer.h"

namespace engine {

// engine.model.{d_model, layers, heads, mlp, action_horizon, action_dim, action_head} and
// engine.attention; vocab and positions keep PolicyConfig's defaults (512 each, matching
// api::kMaxPositions). Errors: an action head or attention the model does not know, or a shape
// PolicyConfig::Validate rejects (ParseJobSpec rejects both first).
common::Result<PolicyConfig> PolicyConfigFromOptions(const api::EngineOptions& options);

// engine.fp8.{scaling, amax_history} for PolicyTransformer::EnableFp8Compute.
Fp8ComputeOptions Fp8ComputeOptionsFrom(const api::Fp8Options& fp8);

}  // namespace engine
