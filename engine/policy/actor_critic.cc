#include "engine/policy/actor_critic.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/format/checkpoint_model.h"

namespace engine {

bool SameTrunkShape(const PolicyConfig& c, const nlohmann::json& m) {
  if (!m.is_object()) return false;
  // The stored shape but its parameter count, which the shape decides.
  nlohmann::json want = ModelJson(c, 0), got = m;
  want.erase("params");
  got.erase("params");
  return got == want;
}

common::Result<std::unique_ptr<ActorCritic>> ActorCritic::Create(const PolicyConfig& config,
                                                                 uint64_t seed,
                                                                 float init_log_std) {
  EMBODY_ASSIGN_OR_RETURN(trunk, PolicyTransformer::Create(config));
  trunk->Init(seed);
  auto ac = std::unique_ptr<ActorCritic>(new ActorCritic(std::move(trunk), init_log_std));
  ac->InitHeads();
  return ac;
}

ActorCritic::ActorCritic(std::unique_ptr<PolicyTransformer> trunk, float init_log_std)
    : trunk_(std::move(trunk)), init_log_std_(init_log_std) {
  const size_t C = trunk_->config().d_model, A = trunk_->config().action_dim;
  mean_w_ = 0;
  mean_b_ = A * C;
  log_std_ = mean_b_ + A;
  value_w_ = log_std_ + A;
  value_b_ = value_w_ + C;
  heads_.assign(value_b_ + 1, 0.0f);
  head_grads_.assign(heads_.size(), 0.0f);
}

void ActorCritic::InitHeads() {
  const size_t C = trunk_->config().d_model, A = trunk_->config().action_dim;
  std::fill(heads_.begin(), heads_.end(), 0.0f);
  const float* w = trunk_->param("action_head.weight");
  const float* b = trunk_->param("action_head.bias");
  std::copy(w, w + A * C, heads_.begin() + mean_w_);
  std::copy(b, b + A, heads_.begin() + mean_b_);
  std::fill(heads_.begin() + log_std_, heads_.begin() + log_std_ + A, init_log_std_);
}

common::Status ActorCritic::LoadTrunk(const CheckpointData& ck) {
  const nlohmann::json model = ck.config.value("model", nlohmann::json());
  if (!SameTrunkShape(trunk_->config(), model) || ck.params.size() != trunk_->num_params()) {
    const PolicyConfig& c = trunk_->config();
    return common::InvalidArgument(
        "the checkpoint holds a different model (" + model.dump() + ", " +
        std::to_string(ck.params.size()) + " params) than the job's engine.model (d_model " +
        std::to_string(c.d_model) + ", layers " + std::to_string(c.layers) + ", heads " +
        std::to_string(c.heads) + ", mlp " + std::to_string(c.mlp) + ", action_dim " +
        std::to_string(c.action_dim) + ", action_horizon " + std::to_string(c.action_horizon) +
        ", " + std::to_string(trunk_->num_params()) + " params)");
  }
  std::copy(ck.params.begin(), ck.params.end(), trunk_->params());
  InitHeads();
  return common::Status::Ok();
}

void ActorCritic::ZeroGrad() {
  trunk_->ZeroGrad();
  std::fill(head_grads_.begin(), head_grads_.end(), 0.0f);
}

common::Status ActorCritic::Forward(std::span<const PolicySample> obs) {
  const PolicyConfig& cfg = trunk_->config();
  const int n = static_cast<int>(obs.size()), C = cfg.d_model, A = cfg.action_dim;
  if (n == 0) return common::InvalidArgument("no observations");
  std::vector<int32_t> lengths(n);
  first_action_slot_.resize(n);
  begin_slot_.resize(n);
  num_tokens_.resize(n);
  int longest = 1;
  for (int i = 0; i < n; ++i) {
    lengths[i] = obs[i].NumTokens(cfg.action_horizon);
    longest = std::max(longest, lengths[i]);
  }
  EMBODY_ASSIGN_OR_RETURN(plan, OneSamplePerRow(lengths, longest));
  EMBODY_RETURN_IF_ERROR(
      BuildPackedBatchInto(obs, plan, cfg.action_horizon, cfg.action_dim, &batch_));
  for (int i = 0; i < n; ++i) {
    begin_slot_[i] = i * longest;  // sample i alone in row i (OneSamplePerRow)
    num_tokens_[i] = lengths[i];
    first_action_slot_[i] = begin_slot_[i] + obs[i].ContextTokens();
  }
  EMBODY_RETURN_IF_ERROR(trunk_->Forward(batch_).status());
  const float* h = trunk_->final_hidden();  // (N, C)
  mean_.assign(static_cast<size_t>(n) * A, 0.0f);
  value_.assign(n, 0.0f);
  pooled_.assign(static_cast<size_t>(n) * C, 0.0f);
  const float* W = heads_.data() + mean_w_;
  for (int i = 0; i < n; ++i) {
    const float* x = h + static_cast<size_t>(first_action_slot_[i]) * C;
    for (int j = 0; j < A; ++j) {
      double s = heads_[mean_b_ + j];
      for (int k = 0; k < C; ++k) s += static_cast<double>(W[j * C + k]) * x[k];
      mean_[static_cast<size_t>(i) * A + j] = static_cast<float>(s);
    }
    float* p = pooled_.data() + static_cast<size_t>(i) * C;
    for (int t = 0; t < num_tokens_[i]; ++t) {
      const float* ht = h + static_cast<size_t>(begin_slot_[i] + t) * C;
      for (int k = 0; k < C; ++k) p[k] += ht[k];
    }
    double v = heads_[value_b_];
    for (int k = 0; k < C; ++k) {
      p[k] /= static_cast<float>(num_tokens_[i]);
      v += static_cast<double>(heads_[value_w_ + k]) * p[k];
    }
    value_[i] = static_cast<float>(v);
  }
  return common::Status::Ok();
}

common::Status ActorCritic::Backward(const float* d_mean, const float* d_log_std,
                                     const float* d_value) {
  const PolicyConfig& cfg = trunk_->config();
  const int n = static_cast<int>(value_.size()), C = cfg.d_model, A = cfg.action_dim;
  const int N = batch_.num_slots();
  if (n == 0) return common::FailedPrecondition("Backward without a Forward");
  const float* h = trunk_->final_hidden();
  d_hidden_.assign(static_cast<size_t>(N) * C, 0.0f);
  float* gW = head_grads_.data() + mean_w_;
  const float* W = heads_.data() + mean_w_;
  for (int j = 0; j < A; ++j) head_grads_[log_std_ + j] += d_log_std[j];
  for (int i = 0; i < n; ++i) {
    const float* x = h + static_cast<size_t>(first_action_slot_[i]) * C;
    float* dx = d_hidden_.data() + static_cast<size_t>(first_action_slot_[i]) * C;
    for (int j = 0; j < A; ++j) {
      const float g = d_mean[static_cast<size_t>(i) * A + j];
      if (g == 0.0f) continue;
      head_grads_[mean_b_ + j] += g;
      for (int k = 0; k < C; ++k) {
        gW[j * C + k] += g * x[k];
        dx[k] += g * W[j * C + k];
      }
    }
    const float dv = d_value[i];
    if (dv == 0.0f) continue;
    head_grads_[value_b_] += dv;
    const float* p = pooled_.data() + static_cast<size_t>(i) * C;
    const float share = dv / static_cast<float>(num_tokens_[i]);
    for (int k = 0; k < C; ++k) head_grads_[value_w_ + k] += dv * p[k];
    for (int t = 0; t < num_tokens_[i]; ++t) {
      float* dh = d_hidden_.data() + static_cast<size_t>(begin_slot_[i] + t) * C;
      for (int k = 0; k < C; ++k) dh[k] += share * heads_[value_w_ + k];
    }
  }
  return trunk_->BackwardFromHidden(d_hidden_.data());
}

}  // namespace engine
