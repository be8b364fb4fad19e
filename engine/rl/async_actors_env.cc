// EnvActors (level 2): one thread per environment, each stepping on its own, their inference
// requests served by an InferenceBatcher, which runs the policy when max_batch requests wait or
// the oldest has waited max_wait.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/rl/async_actors_internal.h"
#include "engine/sim/latency_env.h"
#include "engine/sim/make_env.h"

namespace engine::rl {
namespace {

using actors_internal::ActorEnvSpec;
using actors_internal::Clock;
using actors_internal::Gate;
using actors_internal::kEnvSalt;
using actors_internal::NanosSince;
using actors_internal::NewSegment;
using actors_internal::Record;
using actors_internal::RecordStep;
using actors_internal::Replica;
using actors_internal::SampleRows;

// Serves the environments' inference requests in batches (level 2).
class InferenceBatcher {
  // One environment's request, on its thread's stack until answered.
  struct Request {
    int env;
    int64_t step;
    const PolicySample* obs;
    float* action;
    float* logp;
    float* value;
    int64_t* version;
    Clock::time_point since;
    bool taken = false;  // by the server: it will answer
    bool done = false;
    bool failed = false;
  };

 public:
  InferenceBatcher(const ActorSetup& s, std::unique_ptr<ActorCritic> policy, ActorCounters* c)
      : s_(s), policy_(std::move(policy)), counters_(c) {
    max_batch_ = s.engine.rl.max_batch > 0 ? s.engine.rl.max_batch : s.engine.rl.envs;
    max_wait_ = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(s.engine.rl.max_wait_ms));
  }

  // Blocks until served: fills action (A), *logp, *value and the *version that acted. False
  // when the batcher stopped.
  bool Infer(int env, int64_t step, const PolicySample& obs, float* action, float* logp,
             float* value, int64_t* version) {
    Request r{env, step, &obs, action, logp, value, version, Clock::now()};
    std::unique_lock lk(mu_);
    pending_.push_back(&r);
    cv_.notify_all();
    // A request the server has taken is always answered (it writes into r): wait for that even
    // when stopping; one still pending is withdrawn.
    served_.wait(lk, [&] { return r.done || (stop_ && !r.taken); });
    if (!r.done) {
      pending_.erase(std::remove(pending_.begin(), pending_.end(), &r), pending_.end());
      return false;
    }
    return !r.failed;
  }

  // The serving loop; returns on Stop or on a policy error (which it returns).
  common::Status Run() {
    int64_t version = -1;
    std::vector<Request*> batch;
    std::vector<PolicySample> obs;
    std::vector<common::Rng> rngs;
    std::vector<common::Rng*> noise;
    std::vector<float> act, logp, value;
    const int A = s_.policy.action_dim;
    while (true) {
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !pending_.empty(); });
        if (stop_) return common::Status::Ok();
        // Fire at max_batch waiting requests, or once the oldest has waited max_wait.
        const Clock::time_point deadline = pending_.front()->since + max_wait_;
        while (!stop_ && static_cast<int>(pending_.size()) < max_batch_ &&
               Clock::now() < deadline) {
          cv_.wait_until(lk, deadline);
        }
        if (stop_) return common::Status::Ok();
        // At most max_batch, oldest first; the rest wait for the next round.
        const size_t take = std::min(pending_.size(), static_cast<size_t>(max_batch_));
        batch.assign(pending_.begin(), pending_.begin() + take);
        pending_.erase(pending_.begin(), pending_.begin() + take);
        for (Request* r : batch) r->taken = true;
      }
      version = s_.store->Refresh(version, policy_.get());
      const int n = static_cast<int>(batch.size());
      obs.clear();
      rngs.clear();
      for (Request* r : batch) {
        obs.push_back(*r->obs);
        rngs.push_back(ActionNoise(s_.engine.seed, s_.rank, r->env, r->step));
      }
      noise.resize(n);
      for (int i = 0; i < n; ++i) noise[i] = &rngs[i];
      if (common::Status st = policy_->Forward(obs); !st.ok()) {
        Answer(batch, /*failed=*/true);
        return st;
      }
      act.resize(static_cast<size_t>(n) * A);
      logp.resize(n);
      value.resize(n);
      SampleRows(*policy_, n, noise, act.data(), logp.data(), value.data());
      ++counters_->inferences;
      counters_->inferred += n;
      for (int i = 0; i < n; ++i) {
        Request* r = batch[i];
        std::memcpy(r->action, act.data() + static_cast<size_t>(i) * A, sizeof(float) * A);
        *r->logp = logp[i];
        *r->value = value[i];
        *r->version = version;
      }
      Answer(batch, /*failed=*/false);
    }
  }

  // Marks the taken requests answered (their outputs are written already unless failed).
  void Answer(std::vector<Request*>& batch, bool failed) {
    std::lock_guard lk(mu_);
    for (Request* r : batch) {
      r->failed = failed;
      r->done = true;
    }
    batch.clear();
    served_.notify_all();
  }

  void Stop() {
    std::lock_guard lk(mu_);
    stop_ = true;
    cv_.notify_all();
    served_.notify_all();
  }

 private:
  ActorSetup s_;
  std::unique_ptr<ActorCritic> policy_;
  ActorCounters* counters_;
  int max_batch_ = 1;
  Clock::duration max_wait_{};
  std::mutex mu_;
  std::condition_variable cv_, served_;
  std::vector<Request*> pending_;
  bool stop_ = false;
};

class EnvActors final : public Actors {
 public:
  EnvActors(const ActorSetup& s, std::vector<std::unique_ptr<sim::VecEnv>> envs,
            std::unique_ptr<ActorCritic> policy)
      : s_(s), envs_(std::move(envs)), batcher_(s, std::move(policy), &counters_) {
    server_ = std::thread([this] {
      common::Status st = batcher_.Run();
      if (!st.ok()) s_.queue->Close(st);
      batcher_.Stop();  // environments still waiting get no action and end
    });
    running_ = static_cast<int>(envs_.size());
    for (size_t e = 0; e < envs_.size(); ++e) {
      threads_.emplace_back([this, e] {
        common::Status st = Act(static_cast<int>(e));
        if (!st.ok()) s_.queue->Close(st);
        // The last environment to finish stops the batcher.
        if (--running_ == 0) batcher_.Stop();
      });
    }
  }
  // By now every environment has pushed its last segment, or the store and queue are closed.
  ~EnvActors() override {
    batcher_.Stop();
    for (std::thread& t : threads_) t.join();
    server_.join();
  }
  const ActorCounters& counters() const override { return counters_; }
  int env_threads() const override { return static_cast<int>(envs_.size()); }

 private:
  common::Status Act(int e) {
    const int T = s_.engine.rl.rollout_steps, A = s_.policy.action_dim;
    sim::VecEnv& env = *envs_[e];
    std::vector<float> act(A);
    float logp = 0, value = 0;
    int64_t version = 0, step = 0;
    sim::StepResult res;
    for (int64_t j = 0; j < s_.batches; ++j) {
      if (!Gate(s_, j, &counters_)) return common::Status::Ok();
      Segment seg = NewSegment(e, j, T, A);
      for (int t = 0; t < T; ++t, ++step) {
        const PolicySample& obs = env.observations()[0];
        const auto t0 = Clock::now();
        if (!batcher_.Infer(e, step, obs, act.data(), &logp, &value, &version)) {
          return common::Status::Ok();
        }
        counters_.inference_wait_ns += NanosSince(t0);
        Record(&seg, obs, act.data(), A, logp, value, version);
        EMBODY_RETURN_IF_ERROR(env.Step(act, &res));
        RecordStep(&seg, res, 0);
      }
      seg.last_obs = env.observations()[0];
      s_.queue->Push(std::move(seg));
    }
    return common::Status::Ok();
  }

  ActorSetup s_;
  std::vector<std::unique_ptr<sim::VecEnv>> envs_;
  ActorCounters counters_;
  InferenceBatcher batcher_;
  std::atomic<int> running_{0};
  std::thread server_;
  std::vector<std::thread> threads_;
};

}  // namespace

common::Result<std::unique_ptr<Actors>> StartEnvActors(const ActorSetup& s) {
  const int N = s.engine.rl.envs;
  std::vector<std::unique_ptr<sim::VecEnv>> envs;
  for (int e = 0; e < N; ++e) {
    auto made = sim::MakeVecEnv(ActorEnvSpec(s, 1));
    if (!made.ok()) return common::InvalidArgument(made.status().message(), "engine.rl.task");
    EMBODY_ASSIGN_OR_RETURN(
        env, sim::WithLatency(std::move(made).value(), s.engine.rl.env_latency, s.engine.seed,
                              static_cast<uint64_t>(s.rank) * N + e));
    // One environment per VecEnv: its episodes are seeded by (rank, e) instead of its index.
    env->Reset(common::Rng::ForKey(s.engine.seed, kEnvSalt, static_cast<uint64_t>(s.rank),
                                   static_cast<uint64_t>(e) + 1)
                   .NextU64());
    envs.push_back(std::move(env));
  }
  EMBODY_ASSIGN_OR_RETURN(policy, Replica(s));
  return std::unique_ptr<Actors>(
      std::make_unique<EnvActors>(s, std::move(envs), std::move(policy)));
}

}  // namespace engine::rl
