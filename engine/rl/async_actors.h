// The acting side of asynchronous PPO (async_ppo.h): the policy versions the learner publishes,
// the queue trajectories stream into, and the two ways of acting.
//
//   PolicyStore     the learner's latest parameters and their version. Actors copy them when a
//                   newer version is there, between inferences; they never wait for it, except at
//                   the staleness gate below.
//   SegmentQueue    finished trajectories (Segment: one environment's rollout_steps steps). Every
//                   environment contributes its j-th segment to rollout j, so a rollout is
//                   the (T, N) rollout of the synchronous loop, made by possibly several versions.
//   staleness gate  an environment starts its j-th segment only once the learner's version is at
//                   least j − η. Batch j is learned at version j and every step of it was acted
//                   by a version ≥ j − η: staleness never exceeds η. η = 0 is the synchronous
//                   loop's barrier (acting waits for every update).
//   LockstepActor   one thread steps all environments together, one batched inference per step
//                   (level 2 off): every step waits for the slowest environment.
//   EnvActors       level 2: one thread per environment, each stepping on its own; their
//                   inference requests are served by an InferenceBatcher, which runs the policy
//                   when max_batch requests wait or the oldest has waited max_wait.
// Errors of any actor close the queue; the learner sees them at its next Take.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "api/job_spec.h"
#include "common/rng.h"
#include "common/status.h"
#include "engine/policy/actor_critic.h"
#include "engine/sim/vec_env.h"

namespace engine::rl {

class PolicyStore {
 public:
  explicit PolicyStore(ActorCritic& policy);  // version 0: policy's parameters now
  void Publish(ActorCritic& policy, int64_t version);
  // The same from flat parameters (trunk().params() and heads() of a policy of this shape).
  void Publish(std::vector<float> trunk, std::vector<float> heads, int64_t version);
  // Copies the parameters into *policy when they are newer than `have`; returns the version
  // *policy now holds.
  int64_t Refresh(int64_t have, ActorCritic* policy) const;
  int64_t version() const;
  // Blocks until version() ≥ v or Close(); false when closed.
  bool WaitForVersion(int64_t v) const;
  void Close();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  int64_t version_ = 0;
  bool closed_ = false;
  std::vector<float> trunk_, heads_;
};

// One environment's rollout_steps steps, acted by the versions in `versions`.
struct Segment {
  int env = 0;                        // index on this rank
  int64_t batch = 0;                  // the rollout it belongs to (the environment's segment count)
  std::vector<PolicySample> obs;      // (T)
  std::vector<float> actions;         // (T, A)
  std::vector<float> behaviour_logp;  // (T)
  std::vector<float> values;          // (T) V under the behaviour policy
  std::vector<float> rewards;         // (T)
  std::vector<uint8_t> dones;         // (T)
  std::vector<int64_t> versions;      // (T)
  PolicySample last_obs;              // the observation after the last step
  double episodes = 0, successes = 0, returns = 0;  // of episodes ended in the segment
};

class SegmentQueue {
 public:
  void Push(Segment segment);
  // Blocks until `count` segments of `batch` are queued, then removes and returns them in the
  // order they arrived. Errors: the queue was closed (an actor's error, or the run stopping).
  common::Result<std::vector<Segment>> Take(int64_t batch, int count);
  // Removes the oldest segment of any batch, waiting up to `timeout` for one: true with *out,
  // false when none came. Errors: the queue was closed.
  common::Result<bool> PopFor(std::chrono::microseconds timeout, Segment* out);
  // Segments queued now (every batch).
  int depth() const;
  void Close(common::Status why);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Segment> queued_;
  common::Status closed_ = common::Status::Ok();
  bool is_closed_ = false;
};

// What both kinds of actors share.
struct ActorSetup {
  api::EngineOptions engine;  // model, rl, seed
  PolicyConfig policy;
  int rank = 0;
  int max_staleness = 0;  // η
  PolicyStore* store = nullptr;
  SegmentQueue* queue = nullptr;
  int64_t batches = 0;  // segments each environment makes before it stops
};

// Counters the learner reads for its step events. Times in nanoseconds, summed over threads.
struct ActorCounters {
  std::atomic<int64_t> gate_wait_ns{0};       // environments waiting at the staleness gate
  std::atomic<int64_t> inference_wait_ns{0};  // environments waiting for their action
  std::atomic<int64_t> inferences{0};         // batched policy runs
  std::atomic<int64_t> inferred{0};           // requests they served
};

// A reading of the counters, summed over wherever the actors run (this rank's threads, or the
// rollout ranks of rollout_ranks.h).
struct ActorTotals {
  int64_t wait_ns = 0;  // gate_wait_ns + inference_wait_ns
  int64_t inferences = 0;
  int64_t inferred = 0;
  int env_threads = 0;
};

// Starts acting on construction; the destructor stops and joins every thread (closing the
// store and queue first is what unblocks them).
class Actors {
 public:
  virtual ~Actors() = default;
  virtual const ActorCounters& counters() const = 0;
  // Threads that step environments (for idle shares).
  virtual int env_threads() const = 0;
};

common::Result<std::unique_ptr<Actors>> StartLockstepActors(const ActorSetup& setup);
common::Result<std::unique_ptr<Actors>> StartEnvActors(const ActorSetup& setup);

// Where a learner's trajectories come from, and where its versions go besides its own store:
// actors on this rank's threads (ThreadActing), or rollout ranks (rollout_ranks.h).
class Acting {
 public:
  virtual ~Acting() = default;
  // Blocks until `count` segments of `batch` are in, then removes and returns them in the order
  // they arrived. Errors: an actor's, or the run is stopping.
  virtual common::Result<std::vector<Segment>> Take(int64_t batch, int count) = 0;
  // Segments in and not yet taken.
  virtual int depth() const = 0;
  // After the learner's store has `version`.
  virtual void Publish(ActorCritic& policy, int64_t version) = 0;
  virtual ActorTotals totals() const = 0;
  // Whether an acting rank asked the run to stop (a rollout rank passes its stop flag on to its
  // learner rather than stop alone); threads share the learner's own flag.
  virtual bool stop_requested() const { return false; }
};

// Actors on this rank's threads (lockstep, or level 2's with env_async) reading setup.store,
// streaming into a queue of their own (setup.queue is ignored). The destructor closes the store
// and the queue, which is what lets the threads end, then joins them.
class ThreadActing final : public Acting {
 public:
  static common::Result<std::unique_ptr<ThreadActing>> Start(ActorSetup setup, bool env_async);
  ~ThreadActing() override;
  common::Result<std::vector<Segment>> Take(int64_t batch, int count) override {
    return queue_.Take(batch, count);
  }
  int depth() const override { return queue_.depth(); }
  void Publish(ActorCritic&, int64_t) override {}  // the actors read the store
  ActorTotals totals() const override;
  // The oldest segment of any batch (SegmentQueue::PopFor).
  common::Result<bool> PopFor(std::chrono::microseconds timeout, Segment* out) {
    return queue_.PopFor(timeout, out);
  }

 private:
  explicit ThreadActing(PolicyStore& store) : store_(store) {}
  PolicyStore& store_;
  SegmentQueue queue_;
  std::unique_ptr<Actors> actors_;
};

// The noise of environment `env`'s step `step` on `rank`: the same whichever way it is acted.
common::Rng ActionNoise(uint64_t seed, int rank, int env, int64_t step);

}  // namespace engine::rl
