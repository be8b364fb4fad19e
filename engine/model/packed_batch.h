// PackedBatch: the one input format of the policy transformer, for packed and padded training
// and for inference alike. This file is the contract between the data loader (which builds
// batches) and the model (which reads them); it holds no model code.
//
// A batch is `rows` rows of `tokens_per_row` (T) token slots, slot (r, i) at flat index r·T + i.
// Every sample occupies one contiguous run of slots in one row; a row holds its samples back to
// back from slot 0, and the slots after its last sample are padding. Packed training puts several
// samples in a row (T = the token budget); the padded baseline puts one sample per row
// (rows = samples, T = the padded length). The model computes the same function either way:
// positions restart at 0 in every sample, attention never crosses a sample boundary, padding
// never reaches a real token, and the loss is weighted per action token.
//
// Segments use the layout of engine/data/packing.h (PackedRows), so a packing plan converts
// directly: samples are numbered in row order, row r holds samples [row_begin[r], row_begin[r+1]),
// and its cu_seqlens (samples-in-row + 1 entries: 0, ..., the row's real token count ≤ T) start
// at cu_seqlens[row_begin[r] + r]. These per-row cu_seqlens are what the varlen attention kernel
// (engine/kernels/attention_varlen.h) takes.
//
// One sample's token sequence (BuildPackedBatch writes it in this order):
//   language tokens (ids < vocab)
//   for each frame: cameras × patches_per_camera image patches, then state_tokens proprio state
//   tokens (one unless the state is wider than kStateDim)
//   action_horizon action tokens, one per action of the chunk
// Inputs per modality live in side buffers addressed by the slot's `index`:
//   language  index = token id
//   image     index = row of `patches`       (one 8×8×3 patch, kPatchDim floats, HWC order)
//   state     index = row of `states`        (kStateDim floats; proprio zero-padded to 16)
//   action    index = row of the action buffers (noisy_action, target_velocity, loss_weight)
//   pad       index = -1
// Action rows are numbered in slot order (row-major over the batch).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/data/packing.h"

namespace engine {

inline constexpr int kPatchDim = 8 * 8 * 3;  // floats per image patch
// Values per proprio state token. The reach task's observation (2·action_dim + 2 = 16 floats for
// action_dim 7) fits one; shorter state vectors are zero-padded, a wider state from a dataset
// takes several tokens (PolicySample::state_tokens, api/dataset_fit.h).
inline constexpr int kStateDim = 16;

enum class Modality : uint8_t { kPad = 0, kLanguage = 1, kImage = 2, kState = 3, kAction = 4 };

struct PackedBatch {
  int rows = 0;
  int tokens_per_row = 0;  // T
  int action_dim = 0;

  // Segments (see above): row_begin (rows + 1), cu_seqlens (num_samples + rows).
  std::vector<int32_t> row_begin{0};
  std::vector<int32_t> cu_seqlens;

  // Per slot, (rows, T) row-major.
  std::vector<uint8_t> modality;  // Modality
  std::vector<int32_t> position;  // 0, 1, ... within each sample; 0 on padding
  std::vector<int32_t> sample;    // sample index in the batch; -1 on padding
  std::vector<int32_t> index;     // per-modality meaning, see above

  std::vector<float> patches;  // (num_patches, kPatchDim)
  std::vector<float> states;   // (num_states, kStateDim)

  // Flow matching. Per sample: time t in [0, 1]. Per action row: the model's input
  // x_t = (1 − t)·noise + t·a, the regression target a − noise, and the loss weight.
  std::vector<float> time;             // (num_samples)
  std::vector<float> noisy_action;     // (num_actions, action_dim)
  std::vector<float> target_velocity;  // (num_actions, action_dim)
  std::vector<float> loss_weight;      // (num_actions)

  // Loss = Σ_a weight_a·‖v_a − target_a‖² / normaliser. 0 (the default) uses this batch's own
  // Σ weight·action_dim; data-parallel training sets the global value (summed over ranks) so the
  // ranks' gradients add up to the gradient of one global mean.
  double loss_normalizer = 0.0;

  // BuildPackedBatchInto's scratch (sample lengths), kept so a reused batch does not allocate.
  std::vector<int32_t> scratch_lengths;

  int num_samples() const { return row_begin.back(); }
  int num_slots() const { return rows * tokens_per_row; }
  int num_actions() const { return static_cast<int>(loss_weight.size()); }
  std::span<const int32_t> CuSeqlens(int r) const {
    return {cu_seqlens.data() + row_begin[r] + r,
            static_cast<size_t>(row_begin[r + 1] - row_begin[r] + 1)};
  }
  int RowTokens(int r) const { return CuSeqlens(r).back(); }
  // Σ weight · action_dim: the default loss normaliser.
  double WeightTotal() const;
};

// Checks every invariant the model relies on (sizes, segment layout, positions restarting per
// sample, indices in range, modality-consistent indices, language ids < vocab, positions <
// max_positions). The model calls it once per Forward; loaders may call it in tests.
common::Status ValidateBatch(const PackedBatch& batch, int vocab, int max_positions);

// The content of one sample, before it is placed in a row.
struct PolicySample {
  std::vector<int32_t> language;  // token ids
  int frames = 1;
  int cameras = 1;
  int patches_per_camera = 16;
  std::vector<float> patches;  // (frames · cameras · patches_per_camera, kPatchDim), frame-major
  // A frame's state in state_tokens tokens of kStateDim values, the last zero-padded.
  int state_tokens = 1;
  std::vector<float> states;  // (frames · state_tokens, kStateDim), frame-major
  // Flow matching: the expert chunk a and the noise, (action_horizon, action_dim) each, and t.
  // For inference only the context matters; actions and noise may be left empty.
  std::vector<float> actions;
  std::vector<float> noise;
  float time = 0.0f;
  float weight = 1.0f;  // loss weight of each of its action tokens

  int ContextTokens() const {
    return static_cast<int>(language.size()) +
           frames * (cameras * patches_per_camera + state_tokens);
  }
  int NumTokens(int action_horizon) const { return ContextTokens() + action_horizon; }
};

// Places samples into rows as `plan` says (a PackedRows from engine/data/packing.h over the
// samples' NumTokens(action_horizon), with plan.budget = T) and fills every buffer, computing
// x_t and the target velocity from each sample's actions, noise and t. The batch numbers samples
// in row order: its sample k is samples[plan.sample_index[k]]. Errors name the sample.
common::Result<PackedBatch> BuildPackedBatch(std::span<const PolicySample> samples,
                                             const data::PackedRows& plan, int action_horizon,
                                             int action_dim);
// The same into an existing batch, reusing its buffers: once a batch has held the largest batch
// of a run, refilling it allocates nothing (what the loader's recycled batches rely on). On error
// *out is left partly filled.
common::Status BuildPackedBatchInto(std::span<const PolicySample> samples,
                                    const data::PackedRows& plan, int action_horizon,
                                    int action_dim, PackedBatch* out);

// The padded layout's plan: sample i alone in row i, every row T slots long.
common::Result<data::PackedRows> OneSamplePerRow(std::span<const int32_t> lengths, int T);

}  // namespace engine
