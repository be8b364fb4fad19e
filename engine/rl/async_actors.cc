// The parts of asynchronous acting both kinds of actors share: the policy store, the segment
// queue, ThreadActing (which starts either kind) and the helpers of async_actors_internal.h. The
// actors themselves are in async_actors_lockstep.cc and async_actors_env.cc.
#include "engine/rl/async_actors.h"

#include <cmath>

#include "engine/rl/async_actors_internal.h"
#include "engine/rl/gaussian.h"
#include "engine/sim/make_env.h"

namespace engine::rl {

namespace actors_internal {

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

sim::EnvSpec ActorEnvSpec(const ActorSetup& s, int num_envs) {
  sim::EnvSpec spec = sim::RlEnvSpec(s.engine.rl, s.policy.action_dim, s.policy.vocab);
  spec.num_envs = num_envs;
  return spec;
}

}  // namespace actors_internal

namespace {

constexpr uint64_t kActSalt = 0x616374ULL;  // "act"

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

}  // namespace engine::rl
