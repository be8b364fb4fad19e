#include "engine/model/mlp_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/model/layers.h"
#include "engine/sim/rng.h"

namespace engine {

MlpPolicy::MlpPolicy(const MlpConfig& config) : config_(config) {
  if (config_.obs_dim <= 0 || config_.d_model <= 0 || config_.layers <= 0 || config_.out_dim <= 0) {
    std::fprintf(stderr, "MlpPolicy: invalid config (obs_dim %d, d_model %d, layers %d, out %d)\n",
                 config_.obs_dim, config_.d_model, config_.layers, config_.out_dim);
    std::abort();
  }
  size_t n = 0;
  for (int l = 0; l <= config_.layers; ++l) {
    int in = InDim(l);
    int out = l < config_.layers ? config_.d_model : config_.out_dim;
    weight_offset_.push_back(n);
    n += static_cast<size_t>(out) * in;
    bias_offset_.push_back(n);
    n += static_cast<size_t>(out);
  }
  params_.assign(n, 0.0f);
  grads_.assign(n, 0.0f);
}

void MlpPolicy::Init(uint64_t seed) {
  Rng rng = Rng::ForKey(seed, 0x1417);  // distinct from the data streams
  for (int l = 0; l <= config_.layers; ++l) {
    int in = InDim(l);
    int out = l < config_.layers ? config_.d_model : config_.out_dim;
    double bound = 1.0 / std::sqrt(static_cast<double>(in));
    if (l == config_.layers) bound *= 0.1;
    float* w = params_.data() + weight_offset_[l];
    for (size_t i = 0; i < static_cast<size_t>(out) * in; ++i) {
      w[i] = static_cast<float>(rng.Uniform(-bound, bound));
    }
    std::fill_n(params_.data() + bias_offset_[l], out, 0.0f);
  }
}

float MlpPolicy::Forward(const float* obs, const float* target, int B) {
  const int D = config_.d_model, L = config_.layers;
  if (B != batch_) {
    batch_ = B;
    pre_.assign(static_cast<size_t>(L) * B * D, 0.0f);
    act_.assign(static_cast<size_t>(L) * B * D, 0.0f);
    out_.assign(static_cast<size_t>(B) * config_.out_dim, 0.0f);
    dact_.assign(static_cast<size_t>(B) * D, 0.0f);
    dpre_.assign(static_cast<size_t>(B) * D, 0.0f);
    dout_.assign(static_cast<size_t>(B) * config_.out_dim, 0.0f);
  }
  obs_ = obs;
  target_ = target;
  const float* x = obs;  // (B, InDim(l))
  for (int l = 0; l < L; ++l) {
    float* pre = pre_.data() + static_cast<size_t>(l) * B * D;  // (B, D)
    float* act = act_.data() + static_cast<size_t>(l) * B * D;  // (B, D)
    LinearForward(pre, x, params_.data() + weight_offset_[l], params_.data() + bias_offset_[l], B,
                  InDim(l), D);
    GeluForward(act, pre, B * D);
    x = act;
  }
  LinearForward(out_.data(), x, params_.data() + weight_offset_[L],
                params_.data() + bias_offset_[L], B, D, config_.out_dim);  // (B, out_dim)
  if (target == nullptr) return 0.0f;
  return MseForward(out_.data(), target, B * config_.out_dim);
}

void MlpPolicy::Backward() {
  if (target_ == nullptr || batch_ == 0) {
    std::fprintf(stderr, "MlpPolicy::Backward without a Forward with target\n");
    std::abort();
  }
  const int B = batch_, D = config_.d_model, L = config_.layers;
  // Backward in reverse order of Forward.
  std::fill(dout_.begin(), dout_.end(), 0.0f);
  MseBackward(dout_.data(), out_.data(), target_, B * config_.out_dim);
  const float* last_act = act_.data() + static_cast<size_t>(L - 1) * B * D;
  std::fill(dact_.begin(), dact_.end(), 0.0f);
  LinearBackward(dact_.data(), grads_.data() + weight_offset_[L], grads_.data() + bias_offset_[L],
                 dout_.data(), last_act, params_.data() + weight_offset_[L], B, D, config_.out_dim);
  for (int l = L - 1; l >= 0; --l) {
    const float* pre = pre_.data() + static_cast<size_t>(l) * B * D;
    std::fill(dpre_.begin(), dpre_.end(), 0.0f);
    GeluBackward(dpre_.data(), pre, dact_.data(), B * D);
    const float* x = l == 0 ? obs_ : act_.data() + static_cast<size_t>(l - 1) * B * D;
    // dact_ now becomes the gradient of layer l-1's activation; layer 0's input needs none.
    float* dx = nullptr;
    if (l > 0) {
      std::fill(dact_.begin(), dact_.end(), 0.0f);
      dx = dact_.data();
    }
    LinearBackward(dx, grads_.data() + weight_offset_[l], grads_.data() + bias_offset_[l],
                   dpre_.data(), x, params_.data() + weight_offset_[l], B, InDim(l), D);
  }
}

void MlpPolicy::ZeroGrad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

}  // namespace engine
