#include "engine/kernels/attention_varlen.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/kernels/tile_ops.h"

namespace engine::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Causal mask on a score tile whose rows are queries q0.. and columns keys k0.. of one segment:
// key k0 + j is hidden from query q0 + i when k0 + j > q0 + i. Only tiles crossing the diagonal
// need it.
void MaskCausal(float* s, int lds, int q0, int k0, int m, int n) {
  if (k0 + n - 1 <= q0) return;
  for (int i = 0; i < m; ++i) {
    const int first_hidden = std::max(0, q0 + i - k0 + 1);
    float* row = s + static_cast<long>(i) * lds;
    for (int j = first_hidden; j < n; ++j) row[j] = kNegInf;
  }
}

}  // namespace

common::Status CheckVarlenShape(const VarlenShape& shape, std::span<const int32_t> cu_seqlens) {
  if (shape.H < 1 || shape.D < 1 || shape.T < 0) {
    return common::InvalidArgument(
        "attention needs H ≥ 1, D ≥ 1, T ≥ 0; got H=" + std::to_string(shape.H) +
        " D=" + std::to_string(shape.D) + " T=" + std::to_string(shape.T));
  }
  if (cu_seqlens.empty() || cu_seqlens.front() != 0 || cu_seqlens.back() != shape.T) {
    return common::InvalidArgument(
        "cu_seqlens must start at 0 and end at T=" + std::to_string(shape.T), "cu_seqlens");
  }
  for (size_t s = 1; s < cu_seqlens.size(); ++s) {
    if (cu_seqlens[s] < cu_seqlens[s - 1]) {
      return common::InvalidArgument("cu_seqlens decreases at " + std::to_string(s), "cu_seqlens");
    }
  }
  return common::Status::Ok();
}

common::Status AttentionVarlenForward(float* out, float* lse, const float* q, const float* k,
                                      const float* v, std::span<const int32_t> cu_seqlens,
                                      const VarlenShape& shape, AttentionWorkspace* ws) {
  EMBODY_RETURN_IF_ERROR(CheckVarlenShape(shape, cu_seqlens));
  const int T = shape.T, H = shape.H, D = shape.D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const long HD = static_cast<long>(H) * D;

  // Per head: queries pre-scaled (T, D), keys transposed (D, T) so score rows are contiguous,
  // values (T, D). One tile of scores, one of output accumulators.
  // kᵀ rows carry kCols zero columns past T, so score tiles can be computed in whole register
  // blocks (extra columns are never read).
  const int ldkt = T + tile::kCols;
  float *qs, *kt, *vh, *scores, *acc, *row_max, *row_sum;
  WorkspaceLayout layout;
  layout.Add(&qs, static_cast<size_t>(T) * D);
  layout.Add(&kt, static_cast<size_t>(ldkt) * D);
  layout.Add(&vh, static_cast<size_t>(T) * D);
  layout.Add(&scores, kQueryTile * kKeyTile);
  layout.Add(&acc, static_cast<size_t>(kQueryTile) * D);
  layout.Add(&row_max, kQueryTile);
  layout.Add(&row_sum, kQueryTile);
  layout.Bind(ws);

  for (int h = 0; h < H; ++h) {
    tile::GatherHead(qs, q, T, H, D, h, scale);
    tile::GatherHeadTransposed(kt, ldkt, k, T, H, D, h);
    tile::GatherHead(vh, v, T, H, D, h, 1.0f);
    for (size_t seg = 0; seg + 1 < cu_seqlens.size(); ++seg) {
      const int s0 = cu_seqlens[seg];
      const int len = cu_seqlens[seg + 1] - s0;
      for (int q0 = 0; q0 < len; q0 += kQueryTile) {
        const int m = std::min(kQueryTile, len - q0);
        for (int i = 0; i < m; ++i) {
          row_max[i] = kNegInf;
          row_sum[i] = 0.0f;
        }
        std::fill(acc, acc + static_cast<long>(m) * D, 0.0f);
        const int key_end = shape.causal ? q0 + m : len;
        for (int k0 = 0; k0 < key_end; k0 += kKeyTile) {
          const int n = std::min(kKeyTile, key_end - k0);
          // scores (m, n) = qs[s0+q0 ..] (m, D) · kt[:, s0+k0 ..] (D, n)
          tile::GemmNN(scores, kKeyTile, qs + static_cast<long>(s0 + q0) * D, D, kt + s0 + k0, ldkt,
                       m, tile::RoundUpToBlock(n), D, /*accumulate=*/false);
          if (shape.causal) MaskCausal(scores, kKeyTile, q0, k0, m, n);
          for (int i = 0; i < m; ++i) {
            float* srow = scores + static_cast<long>(i) * kKeyTile;
            // The first key tile always holds a visible key (key 0 is visible to every query),
            // so mx is finite from then on.
            const float mx = std::max(row_max[i], tile::MaxOf(srow, n));
            const float correction = tile::Exp(row_max[i] - mx);
            row_sum[i] = row_sum[i] * correction + tile::ExpShiftedSum(srow, n, mx);
            row_max[i] = mx;
            float* arow = acc + static_cast<long>(i) * D;
            for (int e = 0; e < D; ++e) arow[e] *= correction;
          }
          // acc (m, D) += P (m, n) · v[s0+k0 ..] (n, D)
          tile::GemmNN(acc, D, scores, kKeyTile, vh + static_cast<long>(s0 + k0) * D, D, m, D, n,
                       /*accumulate=*/true);
        }
        for (int i = 0; i < m; ++i) {
          const int t = s0 + q0 + i;
          const float inv = 1.0f / row_sum[i];
          const float* arow = acc + static_cast<long>(i) * D;
          float* orow = out + t * HD + static_cast<long>(h) * D;
          for (int e = 0; e < D; ++e) orow[e] = arow[e] * inv;
          lse[static_cast<long>(h) * T + t] = row_max[i] + std::log(row_sum[i]);
        }
      }
    }
  }
  return common::Status::Ok();
}

common::Status AttentionVarlenBackward(float* dq, float* dk, float* dv, const float* dout,
                                       const float* q, const float* k, const float* v,
                                       const float* out, const float* lse,
                                       std::span<const int32_t> cu_seqlens,
                                       const VarlenShape& shape, AttentionWorkspace* ws) {
  EMBODY_RETURN_IF_ERROR(CheckVarlenShape(shape, cu_seqlens));
  const int T = shape.T, H = shape.H, D = shape.D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const long HD = static_cast<long>(H) * D;

  // Per head: qs = scale·q (T, D), k (T, D) and kᵀ (D, T), vᵀ (D, T), dout (T, D),
  // delta_t = dout_t · out_t (T), and dq accumulated over key tiles (T, D).
  // kᵀ and vᵀ rows carry kCols zero columns past T (see the forward).
  const int ldt = T + tile::kCols;
  float *qs, *kh, *kt, *vt, *doh, *delta, *dqh, *probs, *dscores, *dk_acc, *dv_acc;
  WorkspaceLayout layout;
  layout.Add(&qs, static_cast<size_t>(T) * D);
  layout.Add(&kh, static_cast<size_t>(T) * D);
  layout.Add(&kt, static_cast<size_t>(ldt) * D);
  layout.Add(&vt, static_cast<size_t>(ldt) * D);
  layout.Add(&doh, static_cast<size_t>(T) * D);
  layout.Add(&delta, static_cast<size_t>(T));
  layout.Add(&dqh, static_cast<size_t>(T) * D);
  layout.Add(&probs, kQueryTile * kKeyTile);
  layout.Add(&dscores, kQueryTile * kKeyTile);
  layout.Add(&dk_acc, static_cast<size_t>(kKeyTile) * D);
  layout.Add(&dv_acc, static_cast<size_t>(kKeyTile) * D);
  layout.Bind(ws);

  for (int h = 0; h < H; ++h) {
    tile::GatherHead(qs, q, T, H, D, h, scale);
    tile::GatherHead(kh, k, T, H, D, h, 1.0f);
    tile::GatherHeadTransposed(kt, ldt, k, T, H, D, h);
    tile::GatherHeadTransposed(vt, ldt, v, T, H, D, h);
    tile::GatherHead(doh, dout, T, H, D, h, 1.0f);
    for (int t = 0; t < T; ++t) {
      const float* orow = out + t * HD + static_cast<long>(h) * D;
      const float* drow = doh + static_cast<long>(t) * D;
      float d = 0.0f;
      for (int e = 0; e < D; ++e) d += drow[e] * orow[e];
      delta[t] = d;
    }
    std::fill(dqh, dqh + static_cast<long>(T) * D, 0.0f);
    const float* lse_h = lse + static_cast<long>(h) * T;

    for (size_t seg = 0; seg + 1 < cu_seqlens.size(); ++seg) {
      const int s0 = cu_seqlens[seg];
      const int len = cu_seqlens[seg + 1] - s0;
      for (int k0 = 0; k0 < len; k0 += kKeyTile) {
        const int n = std::min(kKeyTile, len - k0);
        std::fill(dk_acc, dk_acc + static_cast<long>(n) * D, 0.0f);
        std::fill(dv_acc, dv_acc + static_cast<long>(n) * D, 0.0f);
        // Causal: queries before k0 see none of these keys.
        const int q_begin = shape.causal ? k0 / kQueryTile * kQueryTile : 0;
        for (int q0 = q_begin; q0 < len; q0 += kQueryTile) {
          const int m = std::min(kQueryTile, len - q0);
          const long qrow = static_cast<long>(s0 + q0);
          // P (m, n) = exp(qs · kᵀ − lse), recomputed.
          const int n_block = tile::RoundUpToBlock(n);
          tile::GemmNN(probs, kKeyTile, qs + qrow * D, D, kt + s0 + k0, ldt, m, n_block, D, false);
          if (shape.causal) MaskCausal(probs, kKeyTile, q0, k0, m, n);
          for (int i = 0; i < m; ++i) {
            float* prow = probs + static_cast<long>(i) * kKeyTile;
            const float l = lse_h[qrow + i];
            tile::ExpShifted(prow, n, l);
          }
          // dV (n, D) += Pᵀ · dout (m, D)
          tile::GemmTNAcc(dv_acc, D, probs, kKeyTile, doh + qrow * D, D, n, D, m);
          // dP (m, n) = dout (m, D) · vᵀ (D, n);  dS = P ∘ (dP − delta)
          tile::GemmNN(dscores, kKeyTile, doh + qrow * D, D, vt + s0 + k0, ldt, m, n_block, D,
                       false);
          for (int i = 0; i < m; ++i) {
            const float* prow = probs + static_cast<long>(i) * kKeyTile;
            float* dsrow = dscores + static_cast<long>(i) * kKeyTile;
            const float d = delta[qrow + i];
            for (int j = 0; j < n; ++j) dsrow[j] = prow[j] * (dsrow[j] - d);
          }
          // dq (m, D) += dS · k (n, D)   (scaled once at the end)
          tile::GemmNN(dqh + qrow * D, D, dscores, kKeyTile, kh + static_cast<long>(s0 + k0) * D, D,
                       m, D, n, true);
          // dK (n, D) += dSᵀ · qs (m, D)   (qs carries the scale)
          tile::GemmTNAcc(dk_acc, D, dscores, kKeyTile, qs + qrow * D, D, n, D, m);
        }
        tile::ScatterAddHead(dk + (s0 + k0) * HD, dk_acc, n, H, D, h, 1.0f);
        tile::ScatterAddHead(dv + (s0 + k0) * HD, dv_acc, n, H, D, h, 1.0f);
      }
    }
    tile::ScatterAddHead(dq, dqh, T, H, D, h, scale);
  }
  return common::Status::Ok();
}

}  // namespace engine::kernels
