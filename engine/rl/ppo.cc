#include "engine/rl/ppo.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common/rng.h"
#include "engine/rl/gaussian.h"

namespace engine::rl {

void ComputeGae(const float* rewards, const float* values, const uint8_t* dones,
                const float* last_values, int T, int N, double gamma, double lambda,
                float* advantages, float* returns) {
  for (int e = 0; e < N; ++e) {
    double next_adv = 0.0;
    double next_value = last_values[e];
    for (int t = T - 1; t >= 0; --t) {
      const size_t i = static_cast<size_t>(t) * N + e;
      const double live = dones[i] ? 0.0 : 1.0;
      const double delta = rewards[i] + gamma * next_value * live - values[i];
      const double adv = delta + gamma * lambda * live * next_adv;
      advantages[i] = static_cast<float>(adv);
      returns[i] = static_cast<float>(adv + values[i]);
      next_adv = adv;
      next_value = values[i];
    }
  }
}

double ClippedSurrogate(double logp, double proximal_logp, double behaviour_logp, double advantage,
                        double clip, double importance_cap, double* d_logp, bool* clipped) {
  const double w = std::min(std::exp(proximal_logp - behaviour_logp), importance_cap);
  const double r = std::exp(logp - proximal_logp);
  const double unclipped = r * advantage;
  const double clipped_obj = std::clamp(r, 1.0 - clip, 1.0 + clip) * advantage;
  // min(...) picks the clipped branch exactly when r is outside [1 − ε, 1 + ε] on the side the
  // advantage favours; there the objective is constant in r.
  const bool use_clipped = clipped_obj < unclipped;
  *clipped = use_clipped;
  *d_logp = use_clipped ? 0.0 : -w * unclipped;  // d(−w r Â)/d log π = −w r Â
  return -w * (use_clipped ? clipped_obj : unclipped);
}

double ValueLoss(double value, double old_value, double target, double clip, bool value_clip,
                 double* d_value) {
  const double plain = (value - target) * (value - target);
  if (!value_clip) {
    *d_value = value - target;
    return 0.5 * plain;
  }
  const double vc = old_value + std::clamp(value - old_value, -clip, clip);
  const double clipped = (vc - target) * (vc - target);
  if (clipped > plain) {
    const bool inside = std::abs(value - old_value) < clip;
    *d_value = inside ? vc - target : 0.0;
    return 0.5 * clipped;
  }
  *d_value = value - target;
  return 0.5 * plain;
}

void AppendRollout(Rollout&& r, const PpoConfig& config, PpoBatch* batch) {
  const int n = r.steps * r.envs;
  std::vector<float> adv(n), ret(n);
  ComputeGae(r.rewards.data(), r.values.data(), r.dones.data(), r.last_values.data(), r.steps,
             r.envs, config.gamma, config.gae_lambda, adv.data(), ret.data());
  for (auto& o : r.obs) batch->obs.push_back(std::move(o));
  batch->actions.insert(batch->actions.end(), r.actions.begin(), r.actions.end());
  batch->behaviour_logp.insert(batch->behaviour_logp.end(), r.behaviour_logp.begin(),
                               r.behaviour_logp.end());
  batch->proximal_logp.insert(batch->proximal_logp.end(), r.behaviour_logp.begin(),
                              r.behaviour_logp.end());
  batch->advantages.insert(batch->advantages.end(), adv.begin(), adv.end());
  batch->returns.insert(batch->returns.end(), ret.begin(), ret.end());
  batch->values.insert(batch->values.end(), r.values.begin(), r.values.end());
  batch->policy_version.insert(batch->policy_version.end(), n, r.policy_version);
}

namespace {

// One step's share of BehaviourStats' three fields, times `weight`, added to *stats.
void AddBehaviourLag(double log_rho, double importance_cap, double weight, PpoStats* stats) {
  const double rho = std::exp(log_rho);
  stats->behaviour_kl += (std::expm1(log_rho) - log_rho) * weight;
  stats->importance_capped += (rho > importance_cap ? 1 : 0) * weight;
  stats->importance_weight += std::min(rho, importance_cap) * weight;
}

}  // namespace

void BehaviourStats(const float* proximal_logp, const float* behaviour_logp, int n,
                    double importance_cap, Communicator* comm, PpoStats* stats) {
  PpoStats sums;
  sums.importance_weight = 0;
  for (int i = 0; i < n; ++i) {
    AddBehaviourLag(double(proximal_logp[i]) - behaviour_logp[i], importance_cap, 1.0, &sums);
  }
  const double count = comm->AllreduceSum(static_cast<double>(n));
  stats->behaviour_kl = comm->AllreduceSum(sums.behaviour_kl) / count;
  stats->importance_capped = comm->AllreduceSum(sums.importance_capped) / count;
  stats->importance_weight = comm->AllreduceSum(sums.importance_weight) / count;
}

PpoLearner::PpoLearner(ActorCritic* policy, const PpoConfig& config, Communicator* comm,
                       uint64_t seed)
    : policy_(policy),
      config_(config),
      comm_(comm),
      seed_(seed),
      trunk_opt_(policy->trunk().num_params(),
                 AdamWConfig{0.9f, 0.999f, 1e-8f, static_cast<float>(config.weight_decay)}),
      head_opt_(policy->heads().size(), AdamWConfig{0.9f, 0.999f, 1e-8f, 0.0f}) {}

common::Result<PpoStats> PpoLearner::Update(PpoBatch& batch) {
  return Update(batch, config_.epochs);
}

common::Result<PpoStats> PpoLearner::Update(PpoBatch& batch, int epochs) {
  const int n = batch.size(), A = policy_->action_dim(), M = config_.minibatches;
  if (n < M || M < 1) {
    return common::InvalidArgument("a batch of " + std::to_string(n) + " steps cannot make " +
                                   std::to_string(M) + " minibatches");
  }
  // Advantages to zero mean, unit variance over every rank's batch.
  double sum = 0.0, sq = 0.0;
  for (float a : batch.advantages) sum += a;
  const double count = comm_->AllreduceSum(static_cast<double>(n));
  const double mu = comm_->AllreduceSum(sum) / count;
  for (float a : batch.advantages) sq += (a - mu) * (a - mu);
  const double sd = std::sqrt(comm_->AllreduceSum(sq) / count) + 1e-8;
  for (float& a : batch.advantages) a = static_cast<float>((a - mu) / sd);

  // The behaviour fields stay on-policy's (0, 0, 1): the asynchronous learner measures the lag
  // against its own policy, which only it knows (BehaviourStats in async_ppo.cc).
  PpoStats stats;
  std::vector<int> order(n);
  std::vector<PolicySample> obs;
  std::vector<float> d_mean, d_value, d_log_std(A);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    common::Rng rng = common::Rng::ForKey(seed_, 0x70706fULL, static_cast<uint64_t>(updates_),
                                          static_cast<uint64_t>(epoch));
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.NextU64() % (i + 1)]);
    for (int k = 0; k < M; ++k) {
      const int begin = static_cast<int>(static_cast<int64_t>(k) * n / M);
      const int end = static_cast<int>(static_cast<int64_t>(k + 1) * n / M);
      const int m = end - begin;
      obs.clear();
      for (int i = begin; i < end; ++i) obs.push_back(batch.obs[order[i]]);
      policy_->ZeroGrad();
      EMBODY_RETURN_IF_ERROR(policy_->Forward(obs));
      const float* mean = policy_->mean();
      const float* value = policy_->value();
      const float* log_std = policy_->log_std();
      d_mean.assign(static_cast<size_t>(m) * A, 0.0f);
      d_value.assign(m, 0.0f);
      std::fill(d_log_std.begin(), d_log_std.end(), 0.0f);
      const double inv_m = 1.0 / m;
      double pl = 0, vl = 0, kl = 0, clipped_count = 0;
      for (int s = 0; s < m; ++s) {
        const int i = order[begin + s];
        const float* a = batch.actions.data() + static_cast<size_t>(i) * A;
        const float* mu_s = mean + static_cast<size_t>(s) * A;
        const double logp = GaussianLogProb(mu_s, log_std, a, A);
        double d_logp = 0.0;
        bool clipped = false;
        pl += ClippedSurrogate(logp, batch.proximal_logp[i], batch.behaviour_logp[i],
                               batch.advantages[i], config_.clip, config_.importance_cap, &d_logp,
                               &clipped);
        clipped_count += clipped ? 1 : 0;
        const double log_ratio = logp - batch.proximal_logp[i];
        kl += std::expm1(log_ratio) - log_ratio;  // (r − 1) − log r ≥ 0
        if (d_logp != 0.0) {
          GaussianLogProbGrad(mu_s, log_std, a, A, d_logp * inv_m,
                              d_mean.data() + static_cast<size_t>(s) * A, d_log_std.data());
        }
        double dv = 0.0;
        vl += ValueLoss(value[s], batch.values[i], batch.returns[i], config_.clip,
                        config_.value_clip, &dv);
        d_value[s] = static_cast<float>(config_.value_coef * dv * inv_m);
      }
      // −entropy_coef · H: H does not depend on the sample, ∂H/∂log_std = 1 per dimension.
      for (int j = 0; j < A; ++j) d_log_std[j] -= static_cast<float>(config_.entropy_coef);
      EMBODY_RETURN_IF_ERROR(policy_->Backward(d_mean.data(), d_log_std.data(), d_value.data()));

      const double norm = ApplyGradients();

      stats.policy_loss += pl * inv_m;
      stats.value_loss += vl * inv_m;
      stats.approx_kl += kl * inv_m;
      stats.clip_fraction += clipped_count * inv_m;
      stats.entropy += GaussianEntropy(log_std, A);
      stats.grad_norm += norm;
      ++stats.minibatches;
    }
  }
  const double world = comm_->world_size(), per = 1.0 / (stats.minibatches * world);
  stats.policy_loss = comm_->AllreduceSum(stats.policy_loss) * per;
  stats.value_loss = comm_->AllreduceSum(stats.value_loss) * per;
  stats.approx_kl = comm_->AllreduceSum(stats.approx_kl) * per;
  stats.clip_fraction = comm_->AllreduceSum(stats.clip_fraction) * per;
  stats.entropy /= stats.minibatches;  // log_std is the same on every rank
  stats.grad_norm /= stats.minibatches;
  ++updates_;
  return stats;
}

double PpoLearner::ApplyGradients() {
  PolicyTransformer& trunk = policy_->trunk();
  comm_->AllreduceMean(trunk.grads(), trunk.num_params());
  comm_->AllreduceMean(policy_->head_grads().data(), policy_->head_grads().size());
  double norm_sq = 0.0;
  for (size_t i = 0; i < trunk.num_params(); ++i)
    norm_sq += double(trunk.grads()[i]) * trunk.grads()[i];
  for (float g : policy_->head_grads()) norm_sq += double(g) * g;
  const double norm = std::sqrt(norm_sq);
  if (config_.max_grad_norm > 0 && norm > config_.max_grad_norm) {
    const float s = static_cast<float>(config_.max_grad_norm / norm);
    for (size_t i = 0; i < trunk.num_params(); ++i) trunk.grads()[i] *= s;
    for (float& g : policy_->head_grads()) g *= s;
  }
  trunk_opt_.Step(trunk.params(), trunk.grads(), static_cast<float>(config_.lr));
  head_opt_.Step(policy_->heads().data(), policy_->head_grads().data(),
                 static_cast<float>(config_.lr));
  return norm;
}

common::Status EvaluatePolicy(ActorCritic& policy, std::span<const PolicySample> obs,
                              const float* actions, std::vector<float>* logp,
                              std::vector<float>* values, int chunk) {
  const int A = policy.action_dim();
  logp->resize(obs.size());
  values->resize(obs.size());
  for (size_t b = 0; b < obs.size(); b += chunk) {
    const size_t e = std::min(obs.size(), b + static_cast<size_t>(chunk));
    EMBODY_RETURN_IF_ERROR(policy.Forward(obs.subspan(b, e - b)));
    for (size_t i = b; i < e; ++i) {
      (*logp)[i] = static_cast<float>(
          GaussianLogProb(policy.mean() + (i - b) * A, policy.log_std(), actions + i * A, A));
      (*values)[i] = policy.value()[i - b];
    }
  }
  return common::Status::Ok();
}

AdvantageWindow::Moments AdvantageWindow::Add(const float* adv, int n, int window,
                                              Communicator* comm) {
  kept_.insert(kept_.end(), adv, adv + n);
  while (static_cast<int>(kept_.size()) > std::max(window, n)) kept_.pop_front();
  double sum = 0.0, sq = 0.0;
  for (float a : kept_) sum += a;
  const double count = comm->AllreduceSum(static_cast<double>(kept_.size()));
  Moments m;
  m.mean = comm->AllreduceSum(sum) / count;
  for (float a : kept_) sq += (a - m.mean) * (a - m.mean);
  m.sd = std::sqrt(comm->AllreduceSum(sq) / count) + 1e-8;
  return m;
}

common::Status PpoLearner::AccumulateStreaming(Rollout&& r, std::span<const float> start_logp,
                                               double weight, int window, PpoBatch* learned) {
  const int T = r.steps, N = r.envs, A = policy_->action_dim(), n = T * N;
  if (static_cast<int>(r.last_values.size()) != N || static_cast<int>(r.obs.size()) != n ||
      static_cast<int>(r.values.size()) != n || r.action_dim != A ||
      static_cast<int>(start_logp.size()) != n) {
    return common::InvalidArgument("a streamed micro-batch's shapes do not match its rollout");
  }
  if (!accumulating_) {
    policy_->ZeroGrad();
    streaming_ = PpoStats{};
    streaming_.importance_weight = 0;  // summed below
    accumulating_ = true;
  }
  // GAE with the values of the update's starting critic, as AppendRollout on the evaluated
  // rollout of the non-streaming learner.
  std::vector<float> adv(n), ret(n);
  ComputeGae(r.rewards.data(), r.values.data(), r.dones.data(), r.last_values.data(), T, N,
             config_.gamma, config_.gae_lambda, adv.data(), ret.data());
  const AdvantageWindow::Moments norm = advantage_window_.Add(adv.data(), n, window, comm_);
  // π_prox: the behaviour policy (w = 1, r clipped around it), or the update's starting policy.
  const float* prox = config_.proximal_behaviour ? r.behaviour_logp.data() : start_logp.data();

  EMBODY_RETURN_IF_ERROR(policy_->Forward(r.obs));  // (T·N) rows, the policy being trained
  const float* mean = policy_->mean();
  const float* value = policy_->value();
  const float* log_std = policy_->log_std();
  std::vector<float> d_mean(static_cast<size_t>(n) * A, 0.0f), d_value(n, 0.0f), d_log_std(A, 0.0f);
  double pl = 0, vl = 0;
  for (int i = 0; i < n; ++i) {
    const float* mu_i = mean + static_cast<size_t>(i) * A;
    const float* a = r.actions.data() + static_cast<size_t>(i) * A;
    const double logp = GaussianLogProb(mu_i, log_std, a, A);
    double d_logp = 0.0;
    bool clipped = false;
    // The lag of the behaviour policy behind the update's starting policy, whichever π_prox is
    // (as the non-streaming learner measures it).
    AddBehaviourLag(double(start_logp[i]) - r.behaviour_logp[i], config_.importance_cap, weight,
                    &streaming_);
    pl += ClippedSurrogate(logp, prox[i], r.behaviour_logp[i], (adv[i] - norm.mean) / norm.sd,
                           config_.clip, config_.importance_cap, &d_logp, &clipped);
    if (d_logp != 0.0) {
      GaussianLogProbGrad(mu_i, log_std, a, A, d_logp * weight,
                          d_mean.data() + static_cast<size_t>(i) * A, d_log_std.data());
    }
    double dv = 0.0;
    vl += ValueLoss(value[i], r.values[i], ret[i], config_.clip, config_.value_clip, &dv);
    d_value[i] = static_cast<float>(config_.value_coef * dv * weight);
  }
  const double share = weight * n;  // this micro-batch's share of the global batch
  for (int j = 0; j < A; ++j) d_log_std[j] -= static_cast<float>(config_.entropy_coef * share);
  EMBODY_RETURN_IF_ERROR(policy_->Backward(d_mean.data(), d_log_std.data(), d_value.data()));
  streaming_.policy_loss += pl * weight;
  streaming_.value_loss += vl * weight;

  for (auto& o : r.obs) learned->obs.push_back(std::move(o));
  learned->actions.insert(learned->actions.end(), r.actions.begin(), r.actions.end());
  learned->behaviour_logp.insert(learned->behaviour_logp.end(), r.behaviour_logp.begin(),
                                 r.behaviour_logp.end());
  learned->proximal_logp.insert(learned->proximal_logp.end(), prox, prox + n);
  learned->advantages.insert(learned->advantages.end(), adv.begin(), adv.end());
  learned->returns.insert(learned->returns.end(), ret.begin(), ret.end());
  learned->values.insert(learned->values.end(), r.values.begin(), r.values.end());
  learned->policy_version.insert(learned->policy_version.end(), n, r.policy_version);
  return common::Status::Ok();
}

common::Result<PpoStats> PpoLearner::StepAccumulated() {
  if (!accumulating_) return common::FailedPrecondition("no micro-batch was accumulated");
  PpoStats stats = streaming_;
  stats.grad_norm = ApplyGradients();
  stats.minibatches = 1;
  const double world = comm_->world_size();
  stats.policy_loss = comm_->AllreduceSum(stats.policy_loss) / world;
  stats.value_loss = comm_->AllreduceSum(stats.value_loss) / world;
  stats.entropy = GaussianEntropy(policy_->log_std(), policy_->action_dim());
  stats.behaviour_kl = comm_->AllreduceSum(stats.behaviour_kl) / world;
  stats.importance_capped = comm_->AllreduceSum(stats.importance_capped) / world;
  stats.importance_weight = comm_->AllreduceSum(stats.importance_weight) / world;
  accumulating_ = false;
  ++updates_;
  return stats;
}

}  // namespace engine::rl
