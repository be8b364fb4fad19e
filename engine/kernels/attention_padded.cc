#include "engine/kernels/attention_padded.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/kernels/tile_ops.h"

namespace engine::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

common::Status CheckPadded(const PaddedShape& s, const uint8_t* key_mask) {
  if (s.B < 0 || s.Tpad < 1 || s.H < 1 || s.D < 1) {
    return common::InvalidArgument("padded attention needs B ≥ 0 and Tpad, H, D ≥ 1");
  }
  for (int b = 0; b < s.B; ++b) {
    const uint8_t* mask = key_mask + static_cast<long>(b) * s.Tpad;
    const bool any = std::any_of(mask, mask + s.Tpad, [](uint8_t x) { return x != 0; });
    if (!any || (s.causal && mask[0] == 0)) {
      return common::InvalidArgument(
          "sequence " + std::to_string(b) + " leaves some query without a visible key", "key_mask");
    }
  }
  return common::Status::Ok();
}

// scores (Tpad, Tpad) = qs · kᵀ, then hidden keys set to -inf.
void Scores(float* scores, const float* qs, const float* kt, const uint8_t* mask,
            const PaddedShape& s) {
  const int T = s.Tpad;
  tile::GemmNN(scores, T, qs, s.D, kt, T, T, T, s.D, false);
  for (int i = 0; i < T; ++i) {
    float* row = scores + static_cast<long>(i) * T;
    for (int j = 0; j < T; ++j) {
      if (mask[j] == 0 || (s.causal && j > i)) row[j] = kNegInf;
    }
  }
}

}  // namespace

common::Status AttentionPaddedForward(float* out, float* lse, const float* q, const float* k,
                                      const float* v, const uint8_t* key_mask,
                                      const PaddedShape& shape, AttentionWorkspace* ws) {
  EMBODY_RETURN_IF_ERROR(CheckPadded(shape, key_mask));
  const int T = shape.Tpad, H = shape.H, D = shape.D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const long seq_stride = static_cast<long>(T) * H * D;

  float *qs, *kt, *vh, *oh, *scores;
  WorkspaceLayout layout;
  layout.Add(&qs, static_cast<size_t>(T) * D);
  layout.Add(&kt, static_cast<size_t>(T) * D);
  layout.Add(&vh, static_cast<size_t>(T) * D);
  layout.Add(&oh, static_cast<size_t>(T) * D);
  layout.Add(&scores, static_cast<size_t>(T) * T);
  layout.Bind(ws);

  for (int b = 0; b < shape.B; ++b) {
    const long base = b * seq_stride;
    const uint8_t* mask = key_mask + static_cast<long>(b) * T;
    for (int h = 0; h < H; ++h) {
      tile::GatherHead(qs, q + base, T, H, D, h, scale);
      tile::GatherHeadTransposed(kt, T, k + base, T, H, D, h);
      tile::GatherHead(vh, v + base, T, H, D, h, 1.0f);
      Scores(scores, qs, kt, mask, shape);
      float* lse_row = lse + (static_cast<long>(b) * H + h) * T;
      for (int i = 0; i < T; ++i) {
        float* row = scores + static_cast<long>(i) * T;
        const float mx = tile::MaxOf(row, T);
        const float sum = tile::ExpShiftedSum(row, T, mx);
        const float inv = 1.0f / sum;
        for (int j = 0; j < T; ++j) row[j] *= inv;
        lse_row[i] = mx + std::log(sum);
      }
      tile::GemmNN(oh, D, scores, T, vh, D, T, D, T, false);  // O = P · V
      float* ob = out + base;
      for (int t = 0; t < T; ++t) {
        std::copy_n(oh + static_cast<long>(t) * D, D,
                    ob + static_cast<long>(t) * H * D + static_cast<long>(h) * D);
      }
    }
  }
  return common::Status::Ok();
}

common::Status AttentionPaddedBackward(float* dq, float* dk, float* dv, const float* dout,
                                       const float* q, const float* k, const float* v,
                                       const float* out, const float* lse, const uint8_t* key_mask,
                                       const PaddedShape& shape, AttentionWorkspace* ws) {
  EMBODY_RETURN_IF_ERROR(CheckPadded(shape, key_mask));
  const int T = shape.Tpad, H = shape.H, D = shape.D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const long seq_stride = static_cast<long>(T) * H * D;

  float *qs, *kh, *kt, *vt, *doh, *delta, *grad, *probs, *dscores;
  WorkspaceLayout layout;
  layout.Add(&qs, static_cast<size_t>(T) * D);
  layout.Add(&kh, static_cast<size_t>(T) * D);
  layout.Add(&kt, static_cast<size_t>(T) * D);
  layout.Add(&vt, static_cast<size_t>(T) * D);
  layout.Add(&doh, static_cast<size_t>(T) * D);
  layout.Add(&delta, static_cast<size_t>(T));
  layout.Add(&grad, static_cast<size_t>(T) * D);
  layout.Add(&probs, static_cast<size_t>(T) * T);
  layout.Add(&dscores, static_cast<size_t>(T) * T);
  layout.Bind(ws);

  for (int b = 0; b < shape.B; ++b) {
    const long base = b * seq_stride;
    const uint8_t* mask = key_mask + static_cast<long>(b) * T;
    for (int h = 0; h < H; ++h) {
      tile::GatherHead(qs, q + base, T, H, D, h, scale);
      tile::GatherHead(kh, k + base, T, H, D, h, 1.0f);
      tile::GatherHeadTransposed(kt, T, k + base, T, H, D, h);
      tile::GatherHeadTransposed(vt, T, v + base, T, H, D, h);
      tile::GatherHead(doh, dout + base, T, H, D, h, 1.0f);
      for (int t = 0; t < T; ++t) {
        const float* orow = out + base + static_cast<long>(t) * H * D + static_cast<long>(h) * D;
        float d = 0.0f;
        for (int e = 0; e < D; ++e) d += doh[static_cast<long>(t) * D + e] * orow[e];
        delta[t] = d;
      }
      // P = exp(S − lse), recomputed.
      Scores(probs, qs, kt, mask, shape);
      const float* lse_row = lse + (static_cast<long>(b) * H + h) * T;
      for (int i = 0; i < T; ++i) {
        float* row = probs + static_cast<long>(i) * T;
        tile::ExpShifted(row, T, lse_row[i]);
      }
      // dV = Pᵀ · dO
      std::fill(grad, grad + static_cast<long>(T) * D, 0.0f);
      tile::GemmTNAcc(grad, D, probs, T, doh, D, T, D, T);
      tile::ScatterAddHead(dv + base, grad, T, H, D, h, 1.0f);
      // dP = dO · Vᵀ;  dS = P ∘ (dP − delta)
      tile::GemmNN(dscores, T, doh, D, vt, T, T, T, D, false);
      for (int i = 0; i < T; ++i) {
        const float* prow = probs + static_cast<long>(i) * T;
        float* dsrow = dscores + static_cast<long>(i) * T;
        for (int j = 0; j < T; ++j) dsrow[j] = prow[j] * (dsrow[j] - delta[i]);
      }
      // dQ = scale · dS · K
      tile::GemmNN(grad, D, dscores, T, kh, D, T, D, T, false);
      tile::ScatterAddHead(dq + base, grad, T, H, D, h, scale);
      // dK = dSᵀ · (scale · Q)
      std::fill(grad, grad + static_cast<long>(T) * D, 0.0f);
      tile::GemmTNAcc(grad, D, dscores, T, qs, D, T, D, T);
      tile::ScatterAddHead(dk + base, grad, T, H, D, h, 1.0f);
    }
  }
  return common::Status::Ok();
}

}  // namespace engine::kernels
