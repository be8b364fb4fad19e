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

// Carves every activation and scratch buffer out of acts_, growing it if the batch needs more.
void PolicyTransformer::BindActivations(int N, long lse_floats, int Na, int Np, int Ns) {
  const long C = config_.d_model, M = config_.mlp, L = config_.layers;
  std::vector<std::pair<float**, long>>& slices = bind_slices_;  // keeps its capacity
  slices.clear();
  auto add = [&](float** p, long n) { slices.push_back({p, (n + 15) / 16 * 16}); };
  resid_.assign(L + 1, nullptr);
  block_acts_.assign(L, BlockActs{});
  for (auto& r : resid_) add(&r, N * C);
  for (auto& b : block_acts_) {
    add(&b.ln1, N * C);
    add(&b.rstd1, N);
    add(&b.attn.q, N * C);
    add(&b.attn.k, N * C);
    add(&b.attn.v, N * C);
    add(&b.attn.attn, N * C);
    add(&b.attn.lse, lse_floats);
    add(&b.mid, N * C);
    add(&b.ln2, N * C);
    add(&b.rstd2, N);
    add(&b.pre, N * M);
    add(&b.act, N * M);
  }
  add(&branch_, N * C);
  add(&lnf_, N * C);
  add(&rstdf_, N);
  add(&head_in_, Na * C);
  add(&pred_, Na * config_.action_dim);
  add(&tfeat_, Na * kTimeFeatures);
  add(&act_emb_, Na * C);
  add(&patch_emb_, Np * C);
  add(&state_emb_, Ns * C);
  add(&dres_, N * C);
  add(&dln_, N * C);
  add(&dpre_, N * M);
  add(&dpred_, Na * config_.action_dim);
  add(&dhead_in_, Na * C);
  add(&dsmall_, std::max({Na, Np, Ns}) * C);
  add(&attn_scratch_.dattn, N * C);
  add(&attn_scratch_.dq, N * C);
  add(&attn_scratch_.dk, N * C);
  add(&attn_scratch_.dv, N * C);
  long total = 0;
  for (auto& s : slices) total += s.second;
  // assign() value-initialises: the pages are touched once here, not inside a step.
  if (static_cast<size_t>(total) > acts_.size()) acts_.assign(total, 0.0f);
  long off = 0;
  for (auto& s : slices) {
    *s.first = acts_.data() + off;
    off += s.second;
  }
}

common::Status PolicyTransformer::PrepareBatch(const PackedBatch& b) {
  EMBODY_RETURN_IF_ERROR(ValidateBatch(b, config_.vocab, config_.max_positions));
  if (b.action_dim != config_.action_dim) {
    return common::InvalidArgument("batch action_dim " + std::to_string(b.action_dim) +
                                   " != model action_dim " + std::to_string(config_.action_dim));
  }
  if (config_.attention == AttentionKind::kPadded) {
    for (int r = 0; r < b.rows; ++r) {
      if (b.row_begin[r + 1] - b.row_begin[r] != 1) {
        return common::InvalidArgument("padded attention needs exactly one sample per row; row " +
                                       std::to_string(r) + " holds " +
                                       std::to_string(b.row_begin[r + 1] - b.row_begin[r]));
      }
    }
  }
  const int Na = b.num_actions(), T = b.tokens_per_row;
  const int Np = static_cast<int>(b.patches.size() / kPatchDim);
  const int Ns = static_cast<int>(b.states.size() / kStateDim);
  // The tokens computed on: varlen, each row's real tokens (its first RowTokens slots, by
  // ValidateBatch), rows back to back; padded, every slot as it lies.
  slots_ = b.num_slots();
  token_slot_.clear();
  row_start_.clear();
  if (config_.attention == AttentionKind::kVarlen) {
    row_start_.resize(b.rows + 1);
    for (int r = 0; r < b.rows; ++r) {
      row_start_[r] = static_cast<int32_t>(token_slot_.size());
      for (int t = 0, real = b.RowTokens(r); t < real; ++t) token_slot_.push_back(r * T + t);
    }
    row_start_[b.rows] = static_cast<int32_t>(token_slot_.size());
    tokens_ = row_start_[b.rows];
  } else {
    tokens_ = b.num_slots();
  }
  const int N = tokens_;
  lang_ids_.assign(N, -1);
  pos_ids_.assign(N, -1);
  mod_ids_.assign(N, -1);
  key_mask_.assign(N, 0);
  image_slots_.assign(Np, -1);
  state_slots_.assign(Ns, -1);
  action_slots_.assign(Na, -1);
  action_time_.assign(Na, 0.0f);
  for (int i = 0; i < N; ++i) {
    const int slot = token_slot_.empty() ? i : token_slot_[i];
    const auto m = static_cast<Modality>(b.modality[slot]);
    if (m == Modality::kPad) continue;
    pos_ids_[i] = b.position[slot];
    mod_ids_[i] = b.modality[slot] - 1;
    key_mask_[i] = 1;
    const int idx = b.index[slot];
    switch (m) {
      case Modality::kLanguage:
        lang_ids_[i] = idx;
        break;
      case Modality::kImage:
        image_slots_[idx] = i;
        break;
      case Modality::kState:
        state_slots_[idx] = i;
        break;
      case Modality::kAction:
        action_slots_[idx] = i;
        action_time_[idx] = b.time[b.sample[slot]];
        break;
      case Modality::kPad:
        break;
    }
  }
  // A patch or state row no slot uses would leave a -1 slot: reject (the loader mis-indexed).
  for (int32_t s : image_slots_) {
    if (s < 0) return common::InvalidArgument("a patch row is not used by any image slot");
  }
  for (int32_t s : state_slots_) {
    if (s < 0) return common::InvalidArgument("a state row is not used by any state slot");
  }
  const double total = b.loss_normalizer > 0.0 ? b.loss_normalizer : b.WeightTotal();
  normalizer_ = total > 0.0 ? total : 1.0;  // no weighted action token: loss and gradients are 0
  BindActivations(N, static_cast<long>(b.rows) * config_.heads * T, Na, Np, Ns);
  batch_ = &b;
  slot_embeddings_valid_ = slot_hidden_valid_ = false;
  return common::Status::Ok();
}

common::Result<float> PolicyTransformer::Forward(const PackedBatch& batch) {
  EMBODY_RETURN_IF_ERROR(PrepareBatch(batch));
  EMBODY_RETURN_IF_ERROR(RunForward());
  const PackedBatch& b = *batch_;
  return static_cast<float>(FlowLossForward(pred_, b.target_velocity.data(), b.loss_weight.data(),
                                            b.num_actions(), config_.action_dim, normalizer_));
}

common::Status PolicyTransformer::RunForward() {
  const PackedBatch& b = *batch_;
  const float* P = params_.data();
  const int N = tokens_, C = config_.d_model, M = config_.mlp, A = config_.action_dim;
  const int Na = b.num_actions(), Np = static_cast<int>(image_slots_.size()),
            Ns = static_cast<int>(state_slots_.size());
  const long NC = static_cast<long>(N) * C;

  // Embeddings: x (N, C) = Σ of the slot's modality input, modality and position embeddings.
  float* x = resid_[0];
  std::memset(x, 0, sizeof(float) * NC);
  EmbeddingForward(x, lang_ids_.data(), P + tok_emb_, N, C);
  EmbeddingForward(x, mod_ids_.data(), P + mod_emb_, N, C);
  EmbeddingForward(x, pos_ids_.data(), P + pos_emb_, N, C);
  LinearForwardMaybeFp8(patch_emb_, b.patches.data(), P + patch_w_, patch_fp8_, P + patch_b_, Np,
                        kPatchDim, C);
  ScatterAddRows(x, patch_emb_, image_slots_.data(), Np, C);
  LinearForwardMaybeFp8(state_emb_, b.states.data(), P + state_w_, state_fp8_, P + state_b_, Ns,
                        kStateDim, C);
  ScatterAddRows(x, state_emb_, state_slots_.data(), Ns, C);
  TimeFeatures(tfeat_, action_time_.data(), Na);  // (Na, 64)
  LinearForwardMaybeFp8(act_emb_, tfeat_, P + time_w_, time_fp8_, P + time_b_, Na, kTimeFeatures,
                        C);
  ScatterAddRows(x, act_emb_, action_slots_.data(), Na, C);
  LinearForwardMaybeFp8(act_emb_, b.noisy_action.data(), P + action_w_, action_fp8_, P + action_b_,
                        Na, A, C);
  ScatterAddRows(x, act_emb_, action_slots_.data(), Na, C);

  const AttentionGrid grid{
      &b,
      config_.heads,
      config_.head_dim(),
      config_.causal,
      config_.attention,
      key_mask_.data(),
      row_start_.empty() ? nullptr : row_start_.data()};
  for (int l = 0; l < config_.layers; ++l) {
    const BlockParams& bp = blocks_[l];
    BlockActs& ba = block_acts_[l];
    RmsNormForward(ba.ln1, ba.rstd1, resid_[l], P + bp.norm1, N, C);
    EMBODY_RETURN_IF_ERROR(SelfAttentionForward(branch_, ba.attn, ba.ln1, P + bp.qkv_w,
                                                P + bp.qkv_b, P + bp.proj_w, P + bp.proj_b, grid,
                                                &ws_, attn_fp8_[l], attn_compute_[l]));
    ResidualForward(ba.mid, resid_[l], branch_, NC);
    RmsNormForward(ba.ln2, ba.rstd2, ba.mid, P + bp.norm2, N, C);
    GeluMlpForward(branch_, ba.pre, ba.act, ba.ln2, P + bp.fc1_w, P + bp.fc1_b, P + bp.fc2_w,
                   P + bp.fc2_b, N, C, M, mlp_fp8_[l], mlp_compute_[l]);
    ResidualForward(resid_[l + 1], ba.mid, branch_, NC);
  }
  RmsNormForward(lnf_, rstdf_, resid_[config_.layers], P + norm_f_, N, C);
  ActionHeadForward(pred_, head_in_, lnf_, action_slots_.data(), P + head_w_, P + head_b_, Na, C, A,
                    head_fp8_);
  return common::Status::Ok();
}

common::Status PolicyTransformer::Backward(const BackwardHooks* hooks) {
  if (batch_ == nullptr) return common::FailedPrecondition("Backward without a Forward");
  if (!fp8_.empty()) {
    return common::FailedPrecondition("a policy with FP8 weights runs inference only");
  }
  const PackedBatch& b = *batch_;
  const float* P = params_.data();
  float* G = grads_.data();
  const int N = tokens_, C = config_.d_model, A = config_.action_dim;
  const int Na = b.num_actions();
  const long NC = static_cast<long>(N) * C;

  // Loss and head: dpred (Na, A) → dln (N, C) at the action slots.
  std::memset(dpred_, 0, sizeof(float) * Na * A);
  FlowLossBackward(dpred_, pred_, b.target_velocity.data(), b.loss_weight.data(), Na, A,
                   normalizer_);
  std::memset(dln_, 0, sizeof(float) * NC);
  ActionHeadBackward(dln_, G + head_w_, G + head_b_, dhead_in_, dpred_, head_in_,
                     action_slots_.data(), P + head_w_, Na, C, A);
  return BackwardTrunk(hooks);
}

common::Status PolicyTransformer::BackwardFromHidden(const float* d_hidden,
                                                     const BackwardHooks* hooks) {
  if (batch_ == nullptr) return common::FailedPrecondition("Backward without a Forward");
  if (!fp8_.empty()) {
    return common::FailedPrecondition("a policy with FP8 weights runs inference only");
  }
  // d_hidden is in the slot layout; the trunk computes on tokens_.
  const long C = config_.d_model;
  for (int i = 0; i < tokens_; ++i) {
    const long slot = token_slot_.empty() ? i : token_slot_[i];
    std::memcpy(dln_ + i * C, d_hidden + slot * C, sizeof(float) * C);
  }
  return BackwardTrunk(hooks);
}

common::Status PolicyTransformer::BackwardTrunk(const BackwardHooks* hooks) {
  auto ready = [hooks](size_t begin, size_t end) {
    if (hooks != nullptr && hooks->ready) hooks->ready(begin, end);
  };
  auto poll = [hooks] {
    if (hooks != nullptr && hooks->poll) hooks->poll();
  };
  const PackedBatch& b = *batch_;
  const float* P = params_.data();
  float* G = grads_.data();
  const int N = tokens_, C = config_.d_model, M = config_.mlp, A = config_.action_dim;
  const int Na = b.num_actions(), Np = static_cast<int>(image_slots_.size()),
            Ns = static_cast<int>(state_slots_.size());
  const long NC = static_cast<long>(N) * C;

  // dln = d final_hidden (N, C) → dres = d resid[L].
  std::memset(dres_, 0, sizeof(float) * NC);
  RmsNormBackward(dres_, G + norm_f_, dln_, resid_[config_.layers], P + norm_f_, rstdf_, N, C);
  ready(norm_f_, layout_.total_floats());  // final norm and action head

  // Blocks in reverse. A residual's backward passes dres through unchanged (ResidualBackward
  // with the identity branch folded in): each branch's input gradient is added into dres.
  const AttentionGrid grid{
      &b,
      config_.heads,
      config_.head_dim(),
      config_.causal,
      config_.attention,
      key_mask_.data(),
      row_start_.empty() ? nullptr : row_start_.data()};
  for (int l = config_.layers - 1; l >= 0; --l) {
    const BlockParams& bp = blocks_[l];
    const BlockActs& ba = block_acts_[l];
    std::memset(dln_, 0, sizeof(float) * NC);
    GeluMlpBackward(dln_, G + bp.fc1_w, G + bp.fc1_b, G + bp.fc2_w, G + bp.fc2_b, dpre_, dres_,
                    ba.ln2, ba.pre, ba.act, P + bp.fc1_w, P + bp.fc2_w, N, C, M, mlp_compute_[l]);
    poll();
    RmsNormBackward(dres_, G + bp.norm2, dln_, ba.mid, P + bp.norm2, ba.rstd2, N, C);
    std::memset(dln_, 0, sizeof(float) * NC);
    poll();
    EMBODY_RETURN_IF_ERROR(SelfAttentionBackward(
        dln_, G + bp.qkv_w, G + bp.qkv_b, G + bp.proj_w, G + bp.proj_b, attn_scratch_, dres_,
        ba.attn, ba.ln1, P + bp.qkv_w, P + bp.proj_w, grid, &ws_, attn_compute_[l]));
    RmsNormBackward(dres_, G + bp.norm1, dln_, resid_[l], P + bp.norm1, ba.rstd1, N, C);
    // Block l's tensors are contiguous: from its norm1 to the next block's (or norm_f).
    ready(bp.norm1, l + 1 < config_.layers ? blocks_[l + 1].norm1 : norm_f_);
  }

  // Embeddings: dres = d x (N, C).
  EmbeddingBackward(G + tok_emb_, lang_ids_.data(), dres_, N, C);
  EmbeddingBackward(G + mod_emb_, mod_ids_.data(), dres_, N, C);
  EmbeddingBackward(G + pos_emb_, pos_ids_.data(), dres_, N, C);
  GatherRows(dsmall_, dres_, image_slots_.data(), Np, C);
  LinearBackwardFast(nullptr, G + patch_w_, G + patch_b_, dsmall_, b.patches.data(), P + patch_w_,
                     Np, kPatchDim, C);
  GatherRows(dsmall_, dres_, state_slots_.data(), Ns, C);
  LinearBackwardFast(nullptr, G + state_w_, G + state_b_, dsmall_, b.states.data(), P + state_w_,
                     Ns, kStateDim, C);
  GatherRows(dsmall_, dres_, action_slots_.data(), Na, C);
  LinearBackwardFast(nullptr, G + action_w_, G + action_b_, dsmall_, b.noisy_action.data(),
                     P + action_w_, Na, A, C);
  LinearBackwardFast(nullptr, G + time_w_, G + time_b_, dsmall_, tfeat_, P + time_w_, Na,
                     kTimeFeatures, C);
  ready(0, blocks_[0].norm1);  // the embeddings come first in the layout
  return common::Status::Ok();
}

common::Status PolicyTransformer::SampleActions(PackedBatch* context, const float* noise, int steps,
                                                float* actions) {
  if (steps < 1) return common::InvalidArgument("steps must be ≥ 1", "steps");
  const int A = config_.action_dim;
  const size_t n = static_cast<size_t>(context->num_actions()) * A;
  std::copy(noise, noise + n, actions);
  const float dt = 1.0f / static_cast<float>(steps);
  for (int k = 0; k < steps; ++k) {
    std::fill(context->time.begin(), context->time.end(), static_cast<float>(k) * dt);
    context->noisy_action.assign(actions, actions + n);
    EMBODY_RETURN_IF_ERROR(PrepareBatch(*context));
    EMBODY_RETURN_IF_ERROR(RunForward());
    for (size_t i = 0; i < n; ++i) actions[i] += dt * pred_[i];
  }
  batch_ = nullptr;  // no Backward after sampling
  return common::Status::Ok();
}

}  // namespace engine
