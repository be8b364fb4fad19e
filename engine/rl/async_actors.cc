#include "engine/rl/async_actors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/rl/gaussian.h"
#include "engine/sim/latency_env.h"
#include "engine/sim/make_env.h"

namespace engine::rl {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NanosSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

constexpr uint64_t kEnvSalt = 0x656e76ULL;  // "env", as the synchronous loop seeds its envs
constexpr uint64_t kActSalt = 0x616374ULL;  // "act"

// A replica of the learner's policy for acting, at the store's current version.
common::Result<std::unique_ptr<ActorCritic>> Replica(const ActorSetup& s) {
  EMBODY_ASSIGN_OR_RETURN(
      policy,
      ActorCritic::Create(s.policy, s.engine.seed, static_cast<float>(s.engine.rl.init_log_std)));
  return policy;
}

// Samples every row of the last Forward: actions (n, A), their log-probs and values.
void SampleRows(const ActorCritic& policy, int n, const std::vector<common::Rng*>& noise,
                float* actions, float* logp, float* values) {
  const int A = policy.action_dim();
  const float* log_std = policy.log_std();
  for (int i = 0; i < n; ++i) {
    const float* mu = policy.mean() + static_cast<size_t>(i) * A;
    float* a = actions + static_cast<size_t>(i) * A;
    for (int j = 0; j < A; ++j)
      a[j] = static_cast<float>(mu[j] + std::exp(log_std[j]) * noise[i]->Normal());
    logp[i] = static_cast<float>(GaussianLogProb(mu, log_std, a, A));
    values[i] = policy.value()[i];
  }
}

void Record(Segment* s, const PolicySample& obs, const float* action, int A, float logp,
            float value, int64_t version) {
  s->obs.push_back(obs);
  s->actions.insert(s->actions.end(), action, action + A);
  s->behaviour_logp.push_back(logp);
  s->values.push_back(value);
  s->versions.push_back(version);
}

void RecordStep(Segment* s, const sim::StepResult& r, int e) {
  s->rewards.push_back(r.reward[e]);
  s->dones.push_back(r.done[e]);
  if (r.done[e]) {
    s->episodes += 1;
    s->successes += r.success[e];
    s->returns += r.episode_return[e];
  }
}

Segment NewSegment(int env, int64_t batch, int T, int A) {
  Segment s;
  s.env = env;
  s.batch = batch;
  s.obs.reserve(T);
  s.actions.reserve(static_cast<size_t>(T) * A);
  return s;
}

// Waits at the staleness gate for batch j; false when the run is closing.
bool Gate(const ActorSetup& s, int64_t j, ActorCounters* c) {
  const auto t0 = Clock::now();
  const bool open = s.store->WaitForVersion(j - s.max_staleness);
  c->gate_wait_ns += NanosSince(t0);
  return open;
}

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

sim::EnvSpec ActorEnvSpec(const ActorSetup& s, int num_envs) {
  sim::EnvSpec spec = sim::RlEnvSpec(s.engine.rl, s.policy.action_dim, s.policy.vocab);
  spec.num_envs = num_envs;
  return spec;
}

}  // namespace

PolicyStore::PolicyStore(ActorCritic& policy) { Publish(policy, 0); }

void PolicyStore::Publish(ActorCritic& policy, int64_t version) {
  std::lock_guard lk(mu_);
  const float* p = policy.trunk().params();
  trunk_.assign(p, p + policy.trunk().num_params());
  heads_ = policy.heads();
  version_ = version;
  cv_.notify_all();
}

void PolicyStore::Publish(std::vector<float> trunk, std::vector<float> heads, int64_t version) {
  std::lock_guard lk(mu_);
  trunk_ = std::move(trunk);
  heads_ = std::move(heads);
  version_ = version;
  cv_.notify_all();
}

int64_t PolicyStore::Refresh(int64_t have, ActorCritic* policy) const {
  std::lock_guard lk(mu_);
  if (have >= version_) return have;
  std::copy(trunk_.begin(), trunk_.end(), policy->trunk().params());
  policy->heads() = heads_;
  return version_;
}

int64_t PolicyStore::version() const {
  std::lock_guard lk(mu_);
  return version_;
}

bool PolicyStore::WaitForVersion(int64_t v) const {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return closed_ || version_ >= v; });
  return !closed_;
}

void PolicyStore::Close() {
  std::lock_guard lk(mu_);
  closed_ = true;
  cv_.notify_all();
}

void SegmentQueue::Push(Segment segment) {
  std::lock_guard lk(mu_);
  queued_.push_back(std::move(segment));
  cv_.notify_all();
}

common::Result<std::vector<Segment>> SegmentQueue::Take(int64_t batch, int count) {
  std::unique_lock lk(mu_);
  auto ready = [&] {
    int n = 0;
    for (const Segment& s : queued_) n += s.batch == batch ? 1 : 0;
    return n >= count;
  };
  cv_.wait(lk, [&] { return is_closed_ || ready(); });
  if (is_closed_) return closed_.ok() ? common::Unavailable("the run is stopping") : closed_;
  std::vector<Segment> out;
  for (auto it = queued_.begin(); it != queued_.end() && static_cast<int>(out.size()) < count;) {
    if (it->batch == batch) {
      out.push_back(std::move(*it));
      it = queued_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

common::Result<bool> SegmentQueue::PopFor(std::chrono::microseconds timeout, Segment* out) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return is_closed_ || !queued_.empty(); });
  if (is_closed_) return closed_.ok() ? common::Unavailable("the run is stopping") : closed_;
  if (queued_.empty()) return false;
  *out = std::move(queued_.front());
  queued_.pop_front();
  return true;
}

int SegmentQueue::depth() const {
  std::lock_guard lk(mu_);
  return static_cast<int>(queued_.size());
}

void SegmentQueue::Close(common::Status why) {
  std::lock_guard lk(mu_);
  if (!is_closed_) closed_ = std::move(why);
  is_closed_ = true;
  cv_.notify_all();
}

common::Result<std::unique_ptr<ThreadActing>> ThreadActing::Start(ActorSetup setup,
                                                                  bool env_async) {
  std::unique_ptr<ThreadActing> a(new ThreadActing(*setup.store));
  setup.queue = &a->queue_;
  EMBODY_ASSIGN_OR_RETURN(actors, env_async ? StartEnvActors(setup) : StartLockstepActors(setup));
  a->actors_ = std::move(actors);
  return a;
}

ThreadActing::~ThreadActing() {
  store_.Close();
  queue_.Close(common::Unavailable("the run ended"));
  actors_.reset();
}

ActorTotals ThreadActing::totals() const {
  const ActorCounters& c = actors_->counters();
  ActorTotals t;
  t.wait_ns = c.gate_wait_ns.load() + c.inference_wait_ns.load();
  t.inferences = c.inferences.load();
  t.inferred = c.inferred.load();
  t.env_threads = actors_->env_threads();
  return t;
}

common::Rng ActionNoise(uint64_t seed, int rank, int env, int64_t step) {
  return common::Rng::ForKey(seed, kActSalt + (static_cast<uint64_t>(rank) << 24),
                             static_cast<uint64_t>(env), static_cast<uint64_t>(step));
}

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
