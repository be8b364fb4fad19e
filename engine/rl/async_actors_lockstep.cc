// LockstepActors: one thread steps all of a rank's environments together, one batched inference
// per step (level 2 off), so every step waits for the slowest environment.
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "engine/rl/async_actors_internal.h"
#include "engine/sim/latency_env.h"
#include "engine/sim/make_env.h"

namespace engine::rl {
namespace {

using actors_internal::ActorEnvSpec;
using actors_internal::Gate;
using actors_internal::kEnvSalt;
using actors_internal::NewSegment;
using actors_internal::Record;
using actors_internal::RecordStep;
using actors_internal::Replica;
using actors_internal::SampleRows;

class LockstepActors final : public Actors {
 public:
  LockstepActors(const ActorSetup& s, std::unique_ptr<sim::VecEnv> env,
                 std::unique_ptr<ActorCritic> policy)
      : s_(s), env_(std::move(env)), policy_(std::move(policy)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~LockstepActors() override { thread_.join(); }
  const ActorCounters& counters() const override { return counters_; }
  int env_threads() const override { return 1; }

 private:
  void Run() {
    common::Status st = Act();
    if (!st.ok()) s_.queue->Close(st);
  }

  common::Status Act() {
    const int N = s_.engine.rl.envs, T = s_.engine.rl.rollout_steps, A = s_.policy.action_dim;
    int64_t version = -1, step = 0;
    std::vector<float> act(static_cast<size_t>(N) * A), logp(N), value(N);
    std::vector<common::Rng> rngs;
    std::vector<common::Rng*> noise(N);
    sim::StepResult res;
    for (int64_t j = 0; j < s_.batches; ++j) {
      if (!Gate(s_, j, &counters_)) return common::Status::Ok();
      std::vector<Segment> segs;
      for (int e = 0; e < N; ++e) segs.push_back(NewSegment(e, j, T, A));
      for (int t = 0; t < T; ++t, ++step) {
        version = s_.store->Refresh(version, policy_.get());
        const std::vector<PolicySample>& obs = env_->observations();
        EMBODY_RETURN_IF_ERROR(policy_->Forward(obs));
        ++counters_.inferences;
        counters_.inferred += N;
        rngs.clear();
        for (int e = 0; e < N; ++e) rngs.push_back(ActionNoise(s_.engine.seed, s_.rank, e, step));
        for (int e = 0; e < N; ++e) noise[e] = &rngs[e];
        SampleRows(*policy_, N, noise, act.data(), logp.data(), value.data());
        for (int e = 0; e < N; ++e) {
          Record(&segs[e], obs[e], act.data() + static_cast<size_t>(e) * A, A, logp[e], value[e],
                 version);
        }
        EMBODY_RETURN_IF_ERROR(env_->Step(act, &res));
        for (int e = 0; e < N; ++e) RecordStep(&segs[e], res, e);
      }
      for (int e = 0; e < N; ++e) {
        segs[e].last_obs = env_->observations()[e];
        s_.queue->Push(std::move(segs[e]));
      }
    }
    return common::Status::Ok();
  }

  ActorSetup s_;
  std::unique_ptr<sim::VecEnv> env_;
  std::unique_ptr<ActorCritic> policy_;
  ActorCounters counters_;
  std::thread thread_;
};

}  // namespace

common::Result<std::unique_ptr<Actors>> StartLockstepActors(const ActorSetup& s) {
  const int N = s.engine.rl.envs;
  auto made = sim::MakeVecEnv(ActorEnvSpec(s, N));
  if (!made.ok()) return common::InvalidArgument(made.status().message(), "engine.rl.task");
  EMBODY_ASSIGN_OR_RETURN(env, sim::WithLatency(std::move(made).value(), s.engine.rl.env_latency,
                                                s.engine.seed, static_cast<uint64_t>(s.rank) * N));
  env->Reset(common::Rng::ForKey(s.engine.seed, kEnvSalt, static_cast<uint64_t>(s.rank)).NextU64());
  EMBODY_ASSIGN_OR_RETURN(policy, Replica(s));
  return std::unique_ptr<Actors>(
      std::make_unique<LockstepActors>(s, std::move(env), std::move(policy)));
}

}  // namespace engine::rl
