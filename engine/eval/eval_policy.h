// A policy to evaluate, loaded from the bytes of a checkpoint file of any kind the engine writes:
//   a training (behaviour-cloning) checkpoint   engine/format/checkpoint.h; the flow-matching
//   policy an rl policy checkpoint                      engine/policy/rl_checkpoint.h; the Gaussian
//   mean an FP8 checkpoint                            engine/format/fp8_checkpoint.h (magic
//   "EMBDFP8W")
// With `fp8` a behaviour-cloning checkpoint is quantised first (engine/policy/ptq.h, the defaults
// of `embody-engine quantize`) and evaluated from the FP8 checkpoint's bytes, exactly as a rollout
// worker would load it. An rl policy has no FP8 path (its heads live outside the quantised
// layout): `fp8` with one is invalid_argument.
//
// EnvFor gives the environment a policy is evaluated in: a behaviour-cloned policy sees what its
// demonstrations showed (one camera; the object state on push and pick_place, none on reach; the
// task's default limits); an rl policy sees what its job trained on (engine.rl: cameras,
// episode_steps, success_radius, privileged state).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/eval/policy_actor.h"
#include "engine/sim/make_env.h"

namespace engine::eval {

struct EvalPolicy {
  std::string kind;  // "bc", "rl"
  bool fp8 = false;  // evaluated through FP8 weights
  int64_t step = 0;  // training steps (updates, for rl) behind the weights
  api::EngineOptions engine;
  std::unique_ptr<PolicyTransformer> flow;
  std::unique_ptr<ActorCritic> rl;
  std::unique_ptr<PolicyActor> actor;
};

common::Result<EvalPolicy> LoadEvalPolicy(const std::string& checkpoint_bytes, bool fp8);

// The environment `policy` is evaluated in on `task` ("reach", "push", "pick_place").
sim::EnvSpec EnvFor(const EvalPolicy& policy, const std::string& task);
// The same from engine options alone: rl_policy says which of the two rules applies.
sim::EnvSpec EnvFor(const api::EngineOptions& engine, bool rl_policy, const std::string& task);

}  // namespace engine::eval
