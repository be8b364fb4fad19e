// What the two ways of acting share (async_actors_lockstep.cc: one thread for every environment;
// async_actors_env.cc: a thread per environment and an inference batcher): the acting policy's
// replica, sampling, trajectory recording and the staleness gate, defined in async_actors.cc.
// Not part of the engine/rl interface; use async_actors.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "engine/rl/async_actors.h"
#include "engine/sim/make_env.h"
#include "engine/sim/vec_env.h"

namespace engine::rl::actors_internal {

using Clock = std::chrono::steady_clock;

inline int64_t NanosSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

constexpr uint64_t kEnvSalt = 0x656e76ULL;  // "env", as the synchronous loop seeds its envs

// A replica of the learner's policy for acting, at the store's current version.
common::Result<std::unique_ptr<ActorCritic>> Replica(const ActorSetup& s);

// Samples every row of the last Forward: actions (n, A), their log-probs and values.
void SampleRows(const ActorCritic& policy, int n, const std::vector<common::Rng*>& noise,
                float* actions, float* logp, float* values);

// One step of environment `e` into its segment: what was acted, then what the step returned.
void Record(Segment* s, const PolicySample& obs, const float* action, int A, float logp,
            float value, int64_t version);
void RecordStep(Segment* s, const sim::StepResult& r, int e);

Segment NewSegment(int env, int64_t batch, int T, int A);

// Waits at the staleness gate for batch j; false when the run is closing.
bool Gate(const ActorSetup& s, int64_t j, ActorCounters* c);

// The environments of this rank's actors, `num_envs` to a VecEnv.
sim::EnvSpec ActorEnvSpec(const ActorSetup& s, int num_envs);

}  // namespace engine::rl::actors_internal
