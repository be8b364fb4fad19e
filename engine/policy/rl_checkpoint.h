// The checkpoint a kind "rl" job leaves: its final policy (trunk and heads) in the engine's
// checkpoint format (engine/format/checkpoint.h), so evaluation (engine/eval/) and anything else
// that reads checkpoints can load it, and the agent uploads it like a training checkpoint.
//
// Layout inside CheckpointData:
//   params  the trunk's flat parameters, then the heads (ActorCritic::heads(): mean_w, mean_b,
//           log_std, value_w, value_b)
//   adam    m and v zero: the file carries the policy, not the PPO optimiser's state (a restarted
//           rl job starts again from its init_from)
//   config  {"kind": "rl", "engine": the job's engine options (JobSpec JSON), "model": the
//            trunk's shape (checkpoint_model.h), "heads": number of head floats, "world_size"}
// A behaviour-cloning trunk loader (ActorCritic::LoadTrunk) refuses it: its params hold more than
// a trunk.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/format/checkpoint.h"
#include "engine/report/event_sink.h"
#include "engine/policy/actor_critic.h"

namespace engine {

CheckpointData RlPolicyCheckpoint(ActorCritic& policy, const api::EngineOptions& engine,
                                  int64_t step, int world_size);

// Writes RlPolicyCheckpoint atomically as <dir>/step-<step>.ckpt (the directory made if needed)
// and posts {"type": "checkpoint", "step", "path", "bytes"} to events (may be null), which is
// what makes the agent upload it. Returns the absolute path.
common::Result<std::string> SaveRlPolicy(const std::string& dir, ActorCritic& policy,
                                         const api::EngineOptions& engine, int64_t step,
                                         int world_size, EventSink* events);

// Whether a decoded checkpoint is an rl policy (config "kind" is "rl").
bool IsRlPolicyCheckpoint(const CheckpointData& checkpoint);

struct LoadedRlPolicy {
  std::unique_ptr<ActorCritic> policy;
  api::EngineOptions engine;  // what the job ran with: model, seed, rl (task, cameras, ...)
};

// Rebuilds the policy from RlPolicyCheckpoint's layout. Errors (invalid_argument): not an rl
// policy, engine options that do not parse, sizes that do not match the model they name.
common::Result<LoadedRlPolicy> LoadRlPolicy(const CheckpointData& checkpoint);

}  // namespace engine
