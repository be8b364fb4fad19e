#include "engine/optim/adamw.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace engine {

AdamW::AdamW(size_t num_params, const AdamWConfig& config)
    : config_(config), m_(num_params, 0.0f), v_(num_params, 0.0f) {}

void AdamW::Step(float* params, const float* grads, float lr) {
  ++t_;
  const float b1 = config_.beta1, b2 = config_.beta2;
  const float c1 = 1.0f - static_cast<float>(std::pow(b1, static_cast<double>(t_)));
  const float c2 = 1.0f - static_cast<float>(std::pow(b2, static_cast<double>(t_)));
  const size_t n = m_.size();
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    m_[i] = b1 * m_[i] + (1.0f - b1) * g;
    v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
    const float m_hat = m_[i] / c1;
    const float v_hat = v_[i] / c2;
    params[i] -= lr * (m_hat / (std::sqrt(v_hat) + config_.eps) + config_.weight_decay * params[i]);
  }
}

void AdamW::Restore(int64_t t, std::vector<float> m, std::vector<float> v) {
  if (m.size() != m_.size() || v.size() != v_.size()) {
    std::fprintf(stderr, "AdamW::Restore: state has %zu/%zu entries, expected %zu\n", m.size(),
                 v.size(), m_.size());
    std::abort();
  }
  t_ = t;
  m_ = std::move(m);
  v_ = std::move(v);
}

double LearningRate(int step, double base_lr, int warmup_steps, int total_steps) {
  if (step < warmup_steps) return base_lr * (step + 1) / warmup_steps;
  const double min_lr = kMinLrRatio * base_lr;
  const int decay_steps = total_steps - warmup_steps - 1;
  if (decay_steps <= 0) return base_lr;
  double ratio = static_cast<double>(step - warmup_steps) / decay_steps;
  if (ratio > 1.0) ratio = 1.0;
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return min_lr + coeff * (base_lr - min_lr);
}

}  // namespace engine
