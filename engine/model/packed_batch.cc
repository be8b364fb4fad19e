#include "engine/model/packed_batch.h"

#include <algorithm>
#include <string>

namespace engine {
namespace {

std::string SlotName(int slot, int T) {
  return "slot (" + std::to_string(slot / T) + ", " + std::to_string(slot % T) + ")";
}

}  // namespace

double PackedBatch::WeightTotal() const {
  double s = 0.0;
  for (float w : loss_weight) s += w;
  return s * action_dim;
}

common::Status ValidateBatch(const PackedBatch& b, int vocab, int max_positions) {
  using common::InvalidArgument;
  if (b.rows < 1 || b.tokens_per_row < 1 || b.action_dim < 1) {
    return InvalidArgument("batch needs rows, tokens_per_row and action_dim ≥ 1");
  }
  if (static_cast<int>(b.row_begin.size()) != b.rows + 1 || b.row_begin[0] != 0) {
    return InvalidArgument("row_begin must have rows + 1 entries starting at 0", "row_begin");
  }
  for (int r = 0; r < b.rows; ++r) {
    if (b.row_begin[r + 1] < b.row_begin[r]) return InvalidArgument("decreasing", "row_begin");
  }
  const int S = b.num_samples(), N = b.num_slots(), A = b.num_actions();
  if (static_cast<int>(b.cu_seqlens.size()) != S + b.rows) {
    return InvalidArgument("cu_seqlens must have num_samples + rows entries", "cu_seqlens");
  }
  const size_t n = static_cast<size_t>(N);
  if (b.modality.size() != n || b.position.size() != n || b.sample.size() != n ||
      b.index.size() != n) {
    return InvalidArgument("per-slot arrays must have rows × tokens_per_row entries");
  }
  if (b.patches.size() % kPatchDim != 0 || b.states.size() % kStateDim != 0) {
    return InvalidArgument("patches/states must hold whole rows of kPatchDim/kStateDim floats");
  }
  if (static_cast<int>(b.time.size()) != S) return InvalidArgument("one t per sample", "time");
  const size_t ad = static_cast<size_t>(A) * b.action_dim;
  if (b.noisy_action.size() != ad || b.target_velocity.size() != ad) {
    return InvalidArgument("noisy_action/target_velocity must be (num_actions, action_dim)");
  }
  const int num_patches = static_cast<int>(b.patches.size() / kPatchDim);
  const int num_states = static_cast<int>(b.states.size() / kStateDim);
  const int T = b.tokens_per_row;
  int next_action = 0;
  for (int r = 0; r < b.rows; ++r) {
    auto cu = b.CuSeqlens(r);
    if (cu[0] != 0 || cu.back() > T) {
      return InvalidArgument(
          "row " + std::to_string(r) + ": cu_seqlens must start at 0 and end ≤ T", "cu_seqlens");
    }
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const int sample = b.row_begin[r] + static_cast<int>(s);
      if (cu[s + 1] <= cu[s]) {
        return InvalidArgument("sample " + std::to_string(sample) + " is empty", "cu_seqlens");
      }
      if (cu[s + 1] - cu[s] > max_positions) {
        return InvalidArgument("sample " + std::to_string(sample) + " has " +
                                   std::to_string(cu[s + 1] - cu[s]) + " tokens, more than " +
                                   std::to_string(max_positions) + " positions",
                               "cu_seqlens");
      }
      for (int i = cu[s]; i < cu[s + 1]; ++i) {
        const int slot = r * T + i;
        if (b.sample[slot] != sample || b.position[slot] != i - cu[s]) {
          return InvalidArgument(SlotName(slot, T) + ": sample/position do not match cu_seqlens");
        }
        const int idx = b.index[slot];
        bool ok = false;
        switch (static_cast<Modality>(b.modality[slot])) {
          case Modality::kLanguage:
            ok = idx >= 0 && idx < vocab;
            break;
          case Modality::kImage:
            ok = idx >= 0 && idx < num_patches;
            break;
          case Modality::kState:
            ok = idx >= 0 && idx < num_states;
            break;
          case Modality::kAction:
            ok = idx == next_action++ && idx < A;
            break;
          case Modality::kPad:
            ok = false;
            break;
        }
        if (!ok) {
          return InvalidArgument(SlotName(slot, T) + ": modality " +
                                 std::to_string(b.modality[slot]) + " with index " +
                                 std::to_string(idx) + " is invalid");
        }
      }
    }
    for (int i = cu.back(); i < T; ++i) {
      const int slot = r * T + i;
      if (b.modality[slot] != static_cast<uint8_t>(Modality::kPad) || b.sample[slot] != -1) {
        return InvalidArgument(SlotName(slot, T) + ": slots past the row's samples must be pad");
      }
    }
  }
  if (next_action != A) {
    return InvalidArgument("action buffers hold " + std::to_string(A) + " rows but " +
                           std::to_string(next_action) + " action slots use them");
  }
  if (b.loss_normalizer < 0.0) return InvalidArgument("must be ≥ 0", "loss_normalizer");
  return common::Status::Ok();
}

common::Result<data::PackedRows> OneSamplePerRow(std::span<const int32_t> lengths, int T) {
  data::PackedRows plan;
  plan.budget = T;
  plan.row_begin.assign(1, 0);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > T) {
      return common::InvalidArgument("sample " + std::to_string(i) + " has " +
                                     std::to_string(lengths[i]) + " tokens; the row holds " +
                                     std::to_string(T));
    }
    plan.sample_index.push_back(static_cast<int32_t>(i));
    plan.row_begin.push_back(static_cast<int32_t>(i + 1));
    plan.cu_seqlens.push_back(0);
    plan.cu_seqlens.push_back(lengths[i]);
    plan.real_tokens += lengths[i];
  }
  return plan;
}

common::Status BuildPackedBatchInto(std::span<const PolicySample> samples,
                                    const data::PackedRows& plan, int action_horizon,
                                    int action_dim, PackedBatch* out) {
  using common::InvalidArgument;
  const int T = plan.budget;
  if (T < 1 || action_horizon < 1 || action_dim < 1) {
    return InvalidArgument("budget, action_horizon and action_dim must be ≥ 1");
  }
  std::vector<int32_t>& lengths = out->scratch_lengths;
  lengths.resize(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const PolicySample& s = samples[i];
    const std::string name = "sample " + std::to_string(i);
    const size_t num_patches = static_cast<size_t>(s.frames) * s.cameras * s.patches_per_camera;
    if (s.frames < 0 || s.cameras < 0 || s.patches_per_camera < 0 || s.state_tokens < 1 ||
        s.patches.size() != num_patches * kPatchDim ||
        s.states.size() != static_cast<size_t>(s.frames) * s.state_tokens * kStateDim) {
      return InvalidArgument("sample " + std::to_string(i) +
                             ": patches/states do not match frames × cameras / state tokens");
    }
    const size_t chunk = static_cast<size_t>(action_horizon) * action_dim;
    if ((!s.actions.empty() || !s.noise.empty()) &&
        (s.actions.size() != chunk || s.noise.size() != chunk)) {
      return InvalidArgument("sample " + std::to_string(i) +
                             ": actions and noise must be (action_horizon, action_dim)");
    }
    lengths[i] = s.NumTokens(action_horizon);
  }
  EMBODY_RETURN_IF_ERROR(data::ValidatePacking(plan, lengths));

  // Every buffer is cleared, not freed: a recycled batch refills without allocating.
  PackedBatch& b = *out;
  b.rows = plan.num_rows();
  b.tokens_per_row = T;
  b.action_dim = action_dim;
  const size_t N = static_cast<size_t>(b.rows) * T;
  b.modality.assign(N, static_cast<uint8_t>(Modality::kPad));
  b.position.assign(N, 0);
  b.sample.assign(N, -1);
  b.index.assign(N, -1);
  b.row_begin.assign(plan.row_begin.begin(), plan.row_begin.end());
  b.cu_seqlens.assign(plan.cu_seqlens.begin(), plan.cu_seqlens.end());
  b.patches.clear();
  b.states.clear();
  b.time.clear();
  b.noisy_action.clear();
  b.target_velocity.clear();
  b.loss_weight.clear();
  b.loss_normalizer = 0.0;
  for (int r = 0; r < b.rows; ++r) {
    int slot = r * T;
    for (int k = plan.row_begin[r]; k < plan.row_begin[r + 1]; ++k) {
      const PolicySample& s = samples[plan.sample_index[k]];
      int pos = 0;
      auto put = [&](Modality m, int32_t idx) {
        b.modality[slot] = static_cast<uint8_t>(m);
        b.position[slot] = pos++;
        b.sample[slot] = k;
        b.index[slot] = idx;
        ++slot;
      };
      for (int32_t id : s.language) put(Modality::kLanguage, id);
      const int per_frame = s.cameras * s.patches_per_camera;
      for (int f = 0; f < s.frames; ++f) {
        for (int p = 0; p < per_frame; ++p) {
          const float* src = s.patches.data() + static_cast<size_t>(f * per_frame + p) * kPatchDim;
          put(Modality::kImage, static_cast<int32_t>(b.patches.size() / kPatchDim));
          b.patches.insert(b.patches.end(), src, src + kPatchDim);
        }
        for (int q = 0; q < s.state_tokens; ++q) {
          const float* st =
              s.states.data() + static_cast<size_t>(f * s.state_tokens + q) * kStateDim;
          put(Modality::kState, static_cast<int32_t>(b.states.size() / kStateDim));
          b.states.insert(b.states.end(), st, st + kStateDim);
        }
      }
      b.time.push_back(s.time);
      for (int h = 0; h < action_horizon; ++h) {
        put(Modality::kAction, static_cast<int32_t>(b.loss_weight.size()));
        b.loss_weight.push_back(s.weight);
        for (int d = 0; d < action_dim; ++d) {
          const size_t e = static_cast<size_t>(h) * action_dim + d;
          const float a = s.actions.empty() ? 0.0f : s.actions[e];
          const float z = s.noise.empty() ? 0.0f : s.noise[e];
          b.noisy_action.push_back((1.0f - s.time) * z + s.time * a);
          b.target_velocity.push_back(a - z);
        }
      }
    }
  }
  return common::Status::Ok();
}

common::Result<PackedBatch> BuildPackedBatch(std::span<const PolicySample> samples,
                                             const data::PackedRows& plan, int action_horizon,
                                             int action_dim) {
  PackedBatch b;
  EMBODY_RETURN_IF_ERROR(BuildPackedBatchInto(samples, plan, action_horizon, action_dim, &b));
  return b;
}

}  // namespace engine
