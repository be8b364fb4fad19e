// PolicyTransformer's forward pass: a packed batch prepared (token slots, embeddings, masks),
// the activations carved out of one buffer, the blocks run in order, and the flow-matching
// sampler's Euler steps over the action tokens.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/fp8/block_quant.h"
#include "engine/model/linear_fast.h"
#include "engine/model/policy_layers.h"
#include "engine/model/policy_transformer.h"

namespace engine {

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

AttentionGrid PolicyTransformer::Grid() const {
  return AttentionGrid{batch_,
                       config_.heads,
                       config_.head_dim(),
                       config_.causal,
                       config_.attention,
                       key_mask_.data(),
                       row_start_.empty() ? nullptr : row_start_.data()};
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

  const AttentionGrid grid = Grid();
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
