// Asynchronous PPO (kind "rl" with any of the three levels of docs/rl.md on): the learner runs
// on the calling thread, the actors (async_actors.h) on their own threads, or with
// engine.rl.disaggregated.rollout_ranks on rollout ranks of their own (rollout_ranks.h);
// trajectories stream from them into the learner and weights go back with a version.
//
//   level 1, engine.rl.disaggregated   acting goes on while the learner updates: environments run
//                                      up to η = max_staleness versions ahead; on stale steps
//                                      the learner recomputes their values, keeps π_prox = the
//                                      acting policy (or, proximal "current", its own: decoupled
//                                      PPO, capped importance weights, ppo.h) and lowers its
//                                      learning rate (StaleLearningRate). Off: η = 0, acting
//                                      waits for every update.
//   level 2, engine.rl.env_async       one thread per environment, inference batched by
//                                      max_batch / max_wait_ms. Off: one thread steps all of them
//                                      together.
//   level 3, engine.rl.streaming       the learner's first epoch runs as trajectories arrive:
//                                      each global batch (PPO's minibatch, in order of arrival)
//                                      is accumulated micro-batch by micro-batch and ends in one
//                                      optimiser step (PpoLearner::AccumulateStreaming); the other
//                                      epochs − 1 run once the rollout is in. Off: the whole
//                                      rollout, then epochs × minibatches steps.
// The rollout is the synchronous loop's: every environment's next rollout_steps steps, per
// rank; with several ranks every rank runs this pipeline and the learners average gradients
// (with rollout ranks: each learner over its rollout ranks' environments).
// Staleness of a step = the learner's version when it learns it − the version that acted it;
// never above η (the gate in async_actors.h). With every level off, kind rl runs RunSyncPpo.
#pragma once

#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/report/event_sink.h"
#include "engine/rl/sync_ppo.h"

namespace engine::rl {

// Rank 0 posts one step event per update: the synchronous loop's fields plus
// trajectories_per_s, staleness ({"0": steps, ...}), staleness_mean, staleness_max, queue_depth,
// actor_idle_share, learner_idle_share, inference_batch (mean requests per inference) and
// importance_capped (share of steps whose importance weight went over importance_cap).
// The learning rate of an optimiser step on steps of mean staleness `mean_staleness`
// (engine.rl.disaggregated.stale_lr_scale): lr · scale^mean_staleness; lr on fresh data.
double StaleLearningRate(double lr, double scale, double mean_staleness);

common::Result<SyncPpoResult> RunAsyncPpo(const SyncPpoOptions& options, Communicator& comm,
                                          EventSink* events);

}  // namespace engine::rl
