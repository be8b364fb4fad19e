// MlpPolicy: the behaviour-cloning policy of the first engine, an MLP from one observation to
// a whole action chunk, trained with mean squared error against the expert's chunk.
//
//   obs (B, obs_dim) -> [Linear -> GELU] x layers (width d_model) -> Linear -> (B, H * action_dim)
//
// All parameters live in one float allocation (and all gradients in a second one with the same
// layout), so the optimizer, the gradient all-reduce and checkpoints each see one flat buffer.
// Forward keeps the activations of the last batch; Backward uses them and must follow the Forward
// it belongs to. Not thread-safe.
//
// This is the seed of the transformer policy (docs/DESIGN.md §5); the training loop depends only
// on Forward/Backward/params/grads, which the transformer will keep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engine {

struct MlpConfig {
  int obs_dim = 0;
  int d_model = 128;
  int layers = 2;   // hidden Linear+GELU layers
  int out_dim = 0;  // action_horizon * action_dim
};

class MlpPolicy {
 public:
  explicit MlpPolicy(const MlpConfig& config);

  // Deterministic initialisation from seed: every rank given the same seed holds bitwise the same
  // parameters. Hidden weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)), head weights 10x smaller so the
  // first predictions are near zero, biases zero.
  void Init(uint64_t seed);

  // Runs the network on obs (B, obs_dim); writes predictions (B, out_dim) to output(). With
  // target (B, out_dim) it also returns the MSE loss (else 0).
  float Forward(const float* obs, const float* target, int B);
  // Accumulates d loss / d params into grads(), for the batch of the last Forward (with target).
  void Backward();
  void ZeroGrad();

  const MlpConfig& config() const { return config_; }
  size_t num_params() const { return params_.size(); }
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  const float* output() const { return out_.data(); }  // (B, out_dim)

 private:
  int InDim(int layer) const { return layer == 0 ? config_.obs_dim : config_.d_model; }

  MlpConfig config_;
  // Parameter layout, offsets into params_ / grads_:
  //   layer l < layers: weight (d_model, InDim(l)), bias (d_model)
  //   head:             weight (out_dim, d_model),  bias (out_dim)
  std::vector<size_t> weight_offset_;  // layers + 1 entries
  std::vector<size_t> bias_offset_;
  std::vector<float> params_;
  std::vector<float> grads_;

  // Activations of the last Forward, B rows.
  int batch_ = 0;
  const float* obs_ = nullptr;     // (B, obs_dim), caller-owned
  const float* target_ = nullptr;  // (B, out_dim), caller-owned
  std::vector<float> pre_;         // (layers, B, d_model) before GELU
  std::vector<float> act_;         // (layers, B, d_model) after GELU
  std::vector<float> out_;         // (B, out_dim)
  // Scratch for backward.
  std::vector<float> dact_;  // (B, d_model)
  std::vector<float> dpre_;  // (B, d_model)
  std::vector<float> dout_;  // (B, out_dim)
};

}  // namespace engine
