// AdamW (decoupled weight decay, Loshchilov & Hutter) over one flat parameter buffer, and the
// learning-rate schedule the trainer uses with it.
//
// The optimizer state (first and second moments m, v and the step count t) is part of every
// checkpoint, so training resumes exactly where it stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engine {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

class AdamW {
 public:
  AdamW(size_t num_params, const AdamWConfig& config);

  // One update of params (n) from grads (n) at learning rate lr:
  //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  t += 1
  //   p -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + weight_decay * p)
  // Weight decay applies to every parameter (biases included), as in llm.c's simple path.
  void Step(float* params, const float* grads, float lr);

  int64_t t() const { return t_; }
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }
  // Restores the state from a checkpoint; m and v must have num_params entries.
  void Restore(int64_t t, std::vector<float> m, std::vector<float> v);

 private:
  AdamWConfig config_;
  int64_t t_ = 0;
  std::vector<float> m_;
  std::vector<float> v_;
};

// Learning rate for 0-based `step` of `total_steps`: linear warmup from base_lr/warmup_steps to
// base_lr over the first warmup_steps steps, then cosine decay to kMinLrRatio * base_lr at the
// last step.
inline constexpr double kMinLrRatio = 0.1;
double LearningRate(int step, double base_lr, int warmup_steps, int total_steps);

}  // namespace engine
