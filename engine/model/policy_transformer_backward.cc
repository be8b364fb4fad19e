// PolicyTransformer's backward pass: the gradient of the loss (or, BackwardFromHidden, of the
// final hidden state) back through the action head and the blocks in reverse order of the
// forward, with the hooks that let the caller start reducing a block's gradients as soon as
// they are final.
#include <algorithm>
#include <cstring>

#include "engine/model/linear_fast.h"
#include "engine/model/policy_layers.h"
#include "engine/model/policy_transformer.h"

namespace engine {

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
  const AttentionGrid grid = Grid();
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

}  // namespace engine
