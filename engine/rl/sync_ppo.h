// The synchronous colocated PPO loop (kind "rl"): the reference the asynchronous levels of
// docs/rl.md are measured against. Every rank runs its own `envs` environments and a replica of
// the policy; per update:
//   rollout   rollout_steps × (one batched inference over all of the rank's environments, then
//             every environment steps with the sampled actions)
//   update    PpoLearner::Update on the rank's rollout, gradients averaged over ranks
// The ranks' environments are seeded apart (seed, rank), their replicas stay bitwise equal
// (same initial parameters, same averaged gradients). Rank 0 posts one step event per update.
// The same seed and rank count give the same run.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/report/event_sink.h"
#include "engine/rl/ppo.h"

namespace engine::rl {

struct SyncPpoOptions {
  api::EngineOptions engine;  // model, seed and rl
  // A behaviour-cloning checkpoint file the trunk starts from; empty: a fresh trunk.
  std::string init_from;
  // Checked once per update; the ranks stop after the same one (agree_on_stop.h).
  const std::atomic<bool>* stop_requested = nullptr;
  // Where rank 0 writes the final policy (engine/policy/rl_checkpoint.h) as step-<updates>.ckpt and
  // posts a `checkpoint` event for it; empty: none.
  std::string checkpoint_dir;
};

struct UpdateRecord {
  int64_t env_steps = 0;    // over all ranks, after this update
  double mean_return = 0;   // of the episodes that ended in this rollout (NaN: none did)
  double success_rate = 0;  // successes / ended episodes in this rollout (NaN: none ended)
  int64_t episodes = 0;
  double env_steps_per_s = 0;
  PpoStats ppo;
  // Asynchronous runs (async_ppo.h) only.
  double trajectories_per_s = 0;   // segments of rollout_steps steps learned per second
  std::vector<int64_t> staleness;  // steps learned per staleness 0..η (versions behind)
  int64_t max_staleness = 0;
  double mean_staleness = 0;
  int64_t queue_depth = 0;        // trajectories waiting when the learner began this update
  double actor_idle_share = 0;    // of the acting threads' time, waiting (gate or inference)
  double learner_idle_share = 0;  // of the learner's time, waiting for trajectories
  double inference_batch = 0;     // mean requests per batched inference of the actors
};

struct SyncPpoResult {
  std::vector<UpdateRecord> updates;
  std::vector<float> final_heads;  // the policy heads after the last update (for tests)
  std::string checkpoint;          // rank 0: the final policy's file (empty without a directory)
  bool stopped = false;
};

common::Result<SyncPpoResult> RunSyncPpo(const SyncPpoOptions& options, Communicator& comm,
                                         EventSink* events);

// The policy of an rl job: a fresh trunk of `config`, or the trunk of options.init_from (read by
// rank 0, sent to every rank), with fresh heads.
common::Result<std::unique_ptr<ActorCritic>> MakeRlPolicy(const SyncPpoOptions& options,
                                                          const PolicyConfig& config,
                                                          Communicator& comm);

// The step event of one update (docs/rl.md), without the asynchronous fields.
nlohmann::json RlStepEvent(const UpdateRecord& rec, int64_t step, int64_t steps, double lr,
                           double rollout_seconds, double update_seconds, double step_seconds,
                           int world_size);

// PpoConfig from a job's engine.rl (engine.optim is not used by kind "rl").
PpoConfig PpoConfigFromOptions(const api::RlOptions& rl);

}  // namespace engine::rl
