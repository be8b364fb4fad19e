// PolicyTransformer: the embodied policy of docs/design.md, a pre-norm transformer over one
// token sequence per sample (language, image patches, proprio state, action chunk) with a
// flow-matching action head (GR00T N1.5 / π0 style).
//
//   embed (N, C): per slot, by modality
//     language  token[id]                    image   patch (192 → C) linear
//     state     state (16 → C) linear         action  action (A → C) linear(x_t) + time(64 → C)
//     linear(φ(t))
//     + modality[m] + position[p]            (padding slots: all zeros)
//   L × block:  x += proj(attn(qkv(rmsnorm1(x))))     attention within each sample's segment
//               x += fc2(gelu(fc1(rmsnorm2(x))))
//   rmsnorm_f, then on the action slots only: v = action_head(x) (A)
//   loss = Σ_a w_a ‖v_a − (a − noise)_a‖² / (Σ_a w_a · A)       (see PackedBatch)
// φ(t) is the sinusoidal time features of policy_layers.h (TimeFeatures). Attention is
// bidirectional within a sample unless config.causal.
//
// With varlen attention the model computes on the batch's real tokens only: PrepareBatch lists
// them row after row (a compact layout of N = Σ row tokens, no padding slot in any product,
// norm or elementwise pass), and only the accessors below speak of the batch's slot layout.
//
// Parameters live in one float allocation, gradients in a second with the same layout (names,
// shapes and offsets in layout(); see param_layout.h). Activations live in a third allocation
// sized for the largest batch seen (or reserved up front with Reserve) and reused, so steady-state
// steps do not allocate or fault pages. Forward keeps a pointer to the batch: the batch must stay
// alive and unchanged until the Backward that follows. Not thread-safe; single-threaded.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/fp8/block_quant.h"
#include "engine/kernels/attention_workspace.h"
#include "engine/model/attention_layer.h"
#include "engine/model/fp8_linear.h"
#include "engine/model/packed_batch.h"
#include "engine/model/param_layout.h"
#include "engine/model/policy_layers.h"

namespace engine {

struct PolicyConfig {
  int d_model = 256;
  int layers = 4;
  int heads = 8;
  int mlp = 1024;
  int vocab = 512;
  int max_positions = 512;  // learned position embeddings; positions restart per sample
  int action_dim = 7;
  int action_horizon = 16;
  bool causal = false;
  AttentionKind attention = AttentionKind::kVarlen;

  int head_dim() const { return d_model / heads; }
  // heads must divide d_model, head_dim ≤ 128, everything ≥ 1.
  common::Status Validate() const;
};

// What Backward tells its caller while it runs, so a data-parallel gradient all-reduce
// (engine/dist/grad_buckets.h) can start on finished layers while earlier ones are still being
// differentiated. Either callback may be empty.
struct BackwardHooks {
  // Gradient entries [begin, end) of grads() are final for this step. Called once per range, in
  // reverse parameter order: the action head and final norm, then each block from the last to
  // the first, then the embeddings; the ranges tile [0, num_params()) exactly (alignment gaps
  // included), so every entry is reported once.
  std::function<void(size_t, size_t)> ready;
  // Called between the matrix products of a block's backward (communication progress).
  std::function<void()> poll;
};

class PolicyTransformer {
 public:
  static common::Result<std::unique_ptr<PolicyTransformer>> Create(const PolicyConfig& config);

  // Deterministic from seed (same seed, bitwise same parameters on every rank): weights and
  // embeddings N(0, 0.02), the two projections writing into the residual stream (attn.proj,
  // mlp.fc2) N(0, 0.02/sqrt(2·layers)), biases 0, RMSNorm weights 1.
  void Init(uint64_t seed);

  // Grows the activation buffer for batches up to rows × T slots (and their action tokens and
  // patches, bounded by the slots); Forward grows it on demand otherwise.
  void Reserve(int rows, int tokens_per_row);

  // Runs the model on batch and returns the flow-matching loss; velocities in velocity().
  common::Result<float> Forward(const PackedBatch& batch);
  // Accumulates d loss / d params into grads() for the last Forward's batch, reporting finished
  // gradient ranges to hooks (may be null) as it goes.
  common::Status Backward(const BackwardHooks* hooks = nullptr);
  void ZeroGrad();
  // For heads outside the model (the RL policy and value heads, engine/rl/): after a Forward,
  // accumulates into grads() the gradient of a loss whose derivative with respect to
  // final_hidden() is d_hidden (N, d_model), through the final norm, the blocks and the
  // embeddings. The model's own action head gets no gradient (the flow loss is not part of it).
  common::Status BackwardFromHidden(const float* d_hidden, const BackwardHooks* hooks = nullptr);

  // Inference: Euler integration of dx/dt = v(x, t) from x(0) = noise to t = 1 in `steps` equal
  // steps. context's action slots give the chunk's place; its time and noisy_action are
  // overwritten. noise and actions (num_actions, action_dim).
  common::Status SampleActions(PackedBatch* context, const float* noise, int steps, float* actions);

  // Inference from a quantised policy (engine/model/policy_quant.h). `weights` maps names of
  // Linear weights in layout() to their FP8 row slices: three for a block's attn.qkv.weight (q,
  // k, v, so their scales never mix), one for the others. From then on Forward and SampleActions
  // run those products through the fp8 matmul (weight-only, fp32 activations), params() holds
  // the dequantised values, and Backward refuses: a quantised policy is not trained. Names,
  // slice counts and shapes are checked; on error nothing changes.
  common::Status SetFp8Weights(std::map<std::string, std::vector<fp8::Fp8Matrix>> weights);
  const std::map<std::string, std::vector<fp8::Fp8Matrix>>& fp8_weights() const { return fp8_; }

  // FP8 compute in training (engine.fp8.compute, docs/fp8.md): from now on the blocks' Linear
  // products (q, k, v, attention projection, fc1, fc2) run in FP8 (fp8_linear.h) forward and
  // backward; the parameters, gradients and everything else (embeddings and input Linears,
  // norms, attention itself, the action head) stay fp32. Refused for a policy with FP8 weights.
  common::Status EnableFp8Compute(const Fp8ComputeOptions& options);
  bool fp8_compute() const { return !fp8_linears_.empty(); }
  // The statistics of every FP8 product since the last call (all layers merged), then resets
  // them; empty without FP8 compute.
  Fp8ComputeStats TakeFp8ComputeStats();

  const PolicyConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  size_t num_params() const { return params_.size(); }  // floats of the flat buffer
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  // Tensor by name (nullptr if absent), in the parameter or gradient buffer.
  float* param(std::string_view name);
  const float* grad(std::string_view name) const;
  // Predicted velocities of the last Forward, (num_actions, action_dim).
  const float* velocity() const { return pred_; }
  // Token embeddings (input of block 0) and the final RMSNorm's output of the last Forward, in
  // the batch's slot layout (N = rows·T, d_model) with zeros on padding slots. Valid until the
  // next Forward.
  const float* embeddings() const;
  const float* final_hidden() const;
  // Activation floats currently allocated; grows only.
  size_t activation_floats() const { return acts_.size(); }

 private:
  explicit PolicyTransformer(const PolicyConfig& config);

  struct BlockParams {  // offsets into the flat buffers
    size_t norm1, qkv_w, qkv_b, proj_w, proj_b, norm2, fc1_w, fc1_b, fc2_w, fc2_b;
  };
  struct BlockActs {
    float* ln1;    // (N, C)
    float* rstd1;  // (N)
    AttentionActs attn;
    float* mid;    // (N, C) residual after attention
    float* ln2;    // (N, C)
    float* rstd2;  // (N)
    float* pre;    // (N, M)
    float* act;    // (N, M)
  };

  common::Status PrepareBatch(const PackedBatch& batch);
  // Where attention runs for the prepared batch, forward and backward alike: each sample's
  // segment of the computed tokens (the compact rows of varlen, the slots of padded), the heads
  // and the key mask. Valid until the next PrepareBatch.
  AttentionGrid Grid() const;
  // N tokens computed on (compact: the real ones), lse_floats for attention's (rows, H, T).
  void BindActivations(int N, long lse_floats, int Na, int Np, int Ns);
  // A computed (tokens_, C) activation in the slot layout, zeros on padding, written to *out.
  const float* ToSlotLayout(const float* compact, std::vector<float>* out) const;
  common::Status RunForward();
  // Backward from dln_ = d loss / d final_hidden (N, C) down: what Backward and
  // BackwardFromHidden share.
  common::Status BackwardTrunk(const BackwardHooks* hooks);

  PolicyConfig config_;
  ParamLayout layout_;
  // Offsets of the non-block tensors.
  size_t tok_emb_, pos_emb_, mod_emb_, patch_w_, patch_b_, state_w_, state_b_, action_w_, action_b_,
      time_w_, time_b_, norm_f_, head_w_, head_b_;
  std::vector<BlockParams> blocks_;
  std::vector<float> params_;
  std::vector<float> grads_;
  // FP8 weights (SetFp8Weights) and, per layer, pointers into them (null: fp32).
  std::map<std::string, std::vector<fp8::Fp8Matrix>> fp8_;
  std::vector<AttentionFp8Weights> attn_fp8_;
  std::vector<MlpFp8Weights> mlp_fp8_;
  const fp8::Fp8Matrix *patch_fp8_ = nullptr, *state_fp8_ = nullptr, *action_fp8_ = nullptr,
                       *time_fp8_ = nullptr, *head_fp8_ = nullptr;
  // FP8 compute (EnableFp8Compute): 6 per layer (q, k, v, proj, fc1, fc2), and per layer
  // pointers into them (null: fp32). Sized once, so the pointers stay valid.
  std::vector<Fp8Linear> fp8_linears_;
  std::vector<AttentionFp8Compute> attn_compute_;
  std::vector<MlpFp8Compute> mlp_compute_;

  // The batch of the last Forward and its per-token plan, in the computed layout: tokens_
  // tokens, token i at batch slot token_slot_[i]. Varlen: the real tokens only, row r's from
  // row_start_[r]; padded: every slot (token_slot_ empty: the identity; row_start_ empty).
  const PackedBatch* batch_ = nullptr;
  int tokens_ = 0, slots_ = 0;  // slots_: the batch's rows·T
  std::vector<int32_t> token_slot_, row_start_;
  std::vector<int32_t> lang_ids_, pos_ids_, mod_ids_;  // (N), -1 where not applicable
  std::vector<int32_t> image_slots_, state_slots_,
      action_slots_;                // slot of each patch/state/action
  std::vector<float> action_time_;  // (Na)
  std::vector<uint8_t> key_mask_;   // (N)
  double normalizer_ = 1.0;

  // Activations, carved from acts_.
  std::vector<float> acts_;
  std::vector<float*> resid_;  // layers + 1 of (N, C)
  std::vector<BlockActs> block_acts_;
  std::vector<std::pair<float**, long>> bind_slices_;  // BindActivations' scratch list
  float *branch_, *lnf_ = nullptr, *rstdf_, *head_in_, *pred_ = nullptr, *tfeat_, *act_emb_,
                  *patch_emb_, *state_emb_;
  // Backward scratch.
  float *dres_, *dln_, *dpre_, *dpred_, *dhead_in_, *dsmall_;
  AttentionScratch attn_scratch_{};
  kernels::AttentionWorkspace ws_;
  // embeddings() / final_hidden() in the slot layout, filled on first use after a Forward.
  mutable std::vector<float> slot_embeddings_, slot_hidden_;
  mutable bool slot_embeddings_valid_ = false, slot_hidden_valid_ = false;
};

}  // namespace engine
