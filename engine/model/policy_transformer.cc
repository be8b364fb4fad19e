// PolicyTransformer: the configuration's checks, the parameter layout, initialisation, FP8
// weights and compute, and the accessors. The forward pass (batch preparation, activations,
// sampling) is in policy_transformer_forward.cc, the backward pass in
// policy_transformer_backward.cc.
#include "engine/model/policy_transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/rng.h"
#include "engine/fp8/block_quant.h"
#include "engine/model/linear_fast.h"
#include "engine/model/policy_layers.h"

namespace engine {
namespace {

constexpr int kNumModalityEmbeddings = 4;  // language, image, state, action (pad has none)

std::string BlockName(int l, const char* rest) {
  return "blocks." + std::to_string(l) + "." + rest;
}

}  // namespace

common::Status PolicyConfig::Validate() const {
  using common::InvalidArgument;
  if (d_model < 1 || layers < 1 || heads < 1 || mlp < 1 || vocab < 1 || max_positions < 1 ||
      action_dim < 1 || action_horizon < 1) {
    return InvalidArgument("every model dimension must be ≥ 1");
  }
  if (d_model % heads != 0) {
    return InvalidArgument("heads (" + std::to_string(heads) + ") must divide d_model (" +
                               std::to_string(d_model) + ")",
                           "heads");
  }
  if (head_dim() > 128) {
    return InvalidArgument(
        "head dim d_model/heads = " + std::to_string(head_dim()) + " exceeds 128", "heads");
  }
  return common::Status::Ok();
}

common::Result<std::unique_ptr<PolicyTransformer>> PolicyTransformer::Create(
    const PolicyConfig& config) {
  EMBODY_RETURN_IF_ERROR(config.Validate());
  return std::unique_ptr<PolicyTransformer>(new PolicyTransformer(config));
}

PolicyTransformer::PolicyTransformer(const PolicyConfig& c) : config_(c) {
  const int C = c.d_model, M = c.mlp, A = c.action_dim;
  tok_emb_ = layout_.Add("embed.token", {c.vocab, C});
  pos_emb_ = layout_.Add("embed.position", {c.max_positions, C});
  mod_emb_ = layout_.Add("embed.modality", {kNumModalityEmbeddings, C});
  patch_w_ = layout_.Add("embed.patch.weight", {C, kPatchDim});
  patch_b_ = layout_.Add("embed.patch.bias", {C});
  state_w_ = layout_.Add("embed.state.weight", {C, kStateDim});
  state_b_ = layout_.Add("embed.state.bias", {C});
  action_w_ = layout_.Add("embed.action.weight", {C, A});
  action_b_ = layout_.Add("embed.action.bias", {C});
  time_w_ = layout_.Add("embed.time.weight", {C, kTimeFeatures});
  time_b_ = layout_.Add("embed.time.bias", {C});
  for (int l = 0; l < c.layers; ++l) {
    BlockParams b;
    b.norm1 = layout_.Add(BlockName(l, "norm1.weight"), {C});
    b.qkv_w = layout_.Add(BlockName(l, "attn.qkv.weight"), {3 * C, C});
    b.qkv_b = layout_.Add(BlockName(l, "attn.qkv.bias"), {3 * C});
    b.proj_w = layout_.Add(BlockName(l, "attn.proj.weight"), {C, C});
    b.proj_b = layout_.Add(BlockName(l, "attn.proj.bias"), {C});
    b.norm2 = layout_.Add(BlockName(l, "norm2.weight"), {C});
    b.fc1_w = layout_.Add(BlockName(l, "mlp.fc1.weight"), {M, C});
    b.fc1_b = layout_.Add(BlockName(l, "mlp.fc1.bias"), {M});
    b.fc2_w = layout_.Add(BlockName(l, "mlp.fc2.weight"), {C, M});
    b.fc2_b = layout_.Add(BlockName(l, "mlp.fc2.bias"), {C});
    blocks_.push_back(b);
  }
  norm_f_ = layout_.Add("norm_f.weight", {C});
  head_w_ = layout_.Add("action_head.weight", {A, C});
  head_b_ = layout_.Add("action_head.bias", {A});
  params_.assign(layout_.total_floats(), 0.0f);
  grads_.assign(layout_.total_floats(), 0.0f);
  attn_fp8_.assign(c.layers, AttentionFp8Weights{});
  mlp_fp8_.assign(c.layers, MlpFp8Weights{});
  attn_compute_.assign(c.layers, AttentionFp8Compute{});
  mlp_compute_.assign(c.layers, MlpFp8Compute{});
}

common::Status PolicyTransformer::EnableFp8Compute(const Fp8ComputeOptions& options) {
  if (!fp8_.empty()) {
    return common::FailedPrecondition("a policy with FP8 weights runs inference only");
  }
  if (options.history < 1) return common::InvalidArgument("amax history must be >= 1", "history");
  constexpr int kPerLayer = 6;
  fp8_linears_.assign(static_cast<size_t>(config_.layers) * kPerLayer, Fp8Linear(options));
  for (int l = 0; l < config_.layers; ++l) {
    Fp8Linear* f = fp8_linears_.data() + static_cast<size_t>(l) * kPerLayer;
    attn_compute_[l] = AttentionFp8Compute{f, f + 1, f + 2, f + 3};
    mlp_compute_[l] = MlpFp8Compute{f + 4, f + 5};
  }
  return common::Status::Ok();
}

Fp8ComputeStats PolicyTransformer::TakeFp8ComputeStats() {
  Fp8ComputeStats all;
  for (Fp8Linear& f : fp8_linears_) all.Merge(f.TakeStats());
  return all;
}

common::Status PolicyTransformer::SetFp8Weights(
    std::map<std::string, std::vector<fp8::Fp8Matrix>> weights) {
  if (fp8_compute()) {
    return common::FailedPrecondition("a policy training with FP8 compute takes no FP8 weights");
  }
  // Every Linear weight that may be quantised, with where its pointers go.
  struct Slot {
    std::vector<const fp8::Fp8Matrix**> parts;
  };
  std::vector<AttentionFp8Weights> attn(config_.layers);
  std::vector<MlpFp8Weights> mlp(config_.layers);
  const fp8::Fp8Matrix *patch = nullptr, *state = nullptr, *action = nullptr, *time = nullptr,
                       *head = nullptr;
  std::map<std::string, Slot> slots = {{"embed.patch.weight", {{&patch}}},
                                       {"embed.state.weight", {{&state}}},
                                       {"embed.action.weight", {{&action}}},
                                       {"embed.time.weight", {{&time}}},
                                       {"action_head.weight", {{&head}}}};
  for (int l = 0; l < config_.layers; ++l) {
    slots[BlockName(l, "attn.qkv.weight")] = {{&attn[l].q, &attn[l].k, &attn[l].v}};
    slots[BlockName(l, "attn.proj.weight")] = {{&attn[l].proj}};
    slots[BlockName(l, "mlp.fc1.weight")] = {{&mlp[l].fc1}};
    slots[BlockName(l, "mlp.fc2.weight")] = {{&mlp[l].fc2}};
  }
  for (auto& [name, parts] : weights) {
    auto slot = slots.find(name);
    if (slot == slots.end()) {
      return common::InvalidArgument("\"" + name + "\" is not a Linear weight of this model");
    }
    const ParamTensor* t = layout_.Find(name);
    const int n = static_cast<int>(slot->second.parts.size());
    if (static_cast<int>(parts.size()) != n) {
      return common::InvalidArgument(name + ": " + std::to_string(parts.size()) +
                                     " fp8 slices, expected " + std::to_string(n));
    }
    const int rows = t->shape[0] / n, cols = t->shape[1];
    for (const fp8::Fp8Matrix& m : parts) {
      if (m.rows != rows || m.cols != cols || m.block_rows != fp8::kBlock ||
          m.codes.size() != static_cast<size_t>(rows) * cols ||
          m.scales.size() != static_cast<size_t>(m.RowBlocks()) * m.ColBlocks()) {
        return common::InvalidArgument(name + ": an fp8 slice is not (" + std::to_string(rows) +
                                       ", " + std::to_string(cols) + ") in 128 x 128 blocks");
      }
    }
  }
  fp8_ = std::move(weights);
  for (auto& [name, parts] : fp8_) {
    const ParamTensor* t = layout_.Find(name);
    const std::vector<const fp8::Fp8Matrix**>& dst = slots[name].parts;
    const size_t slice = t->size / parts.size();
    for (size_t i = 0; i < parts.size(); ++i) {
      *dst[i] = &parts[i];
      fp8::Dequantize(parts[i], params_.data() + t->offset + i * slice);
    }
  }
  attn_fp8_ = std::move(attn);
  mlp_fp8_ = std::move(mlp);
  patch_fp8_ = patch;
  state_fp8_ = state;
  action_fp8_ = action;
  time_fp8_ = time;
  head_fp8_ = head;
  return common::Status::Ok();
}

void PolicyTransformer::Init(uint64_t seed) {
  common::Rng rng = common::Rng::ForKey(seed, 0x706f6c696379ULL);  // "policy"
  const double out_std = 0.02 / std::sqrt(2.0 * config_.layers);
  std::fill(params_.begin(), params_.end(), 0.0f);
  for (const ParamTensor& t : layout_.tensors()) {
    float* p = params_.data() + t.offset;
    const std::string& n = t.name;
    const bool is_bias = n.ends_with(".bias");
    const bool is_norm = n.find("norm") != std::string::npos;
    if (is_bias) continue;
    if (is_norm) {
      std::fill(p, p + t.size, 1.0f);
      continue;
    }
    const bool is_out = n.ends_with("attn.proj.weight") || n.ends_with("mlp.fc2.weight");
    const double std = is_out ? out_std : 0.02;
    for (size_t i = 0; i < t.size; ++i) p[i] = static_cast<float>(std * rng.Normal());
  }
}

void PolicyTransformer::ZeroGrad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

float* PolicyTransformer::param(std::string_view name) {
  const ParamTensor* t = layout_.Find(name);
  return t == nullptr ? nullptr : params_.data() + t->offset;
}

const float* PolicyTransformer::grad(std::string_view name) const {
  const ParamTensor* t = layout_.Find(name);
  return t == nullptr ? nullptr : grads_.data() + t->offset;
}

void PolicyTransformer::Reserve(int rows, int tokens_per_row) {
  const int N = rows * tokens_per_row;
  // Every slot could be an action, patch or state: bounded by N each.
  BindActivations(N, static_cast<long>(N) * config_.heads, N, N, N);
}

const float* PolicyTransformer::ToSlotLayout(const float* compact, std::vector<float>* out) const {
  if (token_slot_.empty()) return compact;  // computed in the slot layout
  const long C = config_.d_model;
  out->assign(static_cast<size_t>(slots_) * C, 0.0f);
  for (int i = 0; i < tokens_; ++i) {
    std::memcpy(out->data() + token_slot_[i] * C, compact + i * C, sizeof(float) * C);
  }
  return out->data();
}

const float* PolicyTransformer::embeddings() const {
  if (resid_.empty()) return nullptr;
  if (!slot_embeddings_valid_) ToSlotLayout(resid_[0], &slot_embeddings_);
  slot_embeddings_valid_ = true;
  return token_slot_.empty() ? resid_[0] : slot_embeddings_.data();
}

const float* PolicyTransformer::final_hidden() const {
  if (lnf_ == nullptr) return nullptr;
  if (!slot_hidden_valid_) ToSlotLayout(lnf_, &slot_hidden_);
  slot_hidden_valid_ = true;
  return token_slot_.empty() ? lnf_ : slot_hidden_.data();
}

}  // namespace engine
