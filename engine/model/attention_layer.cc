#include "engine/model/attention_layer.h"

#include <cstring>

#include "engine/kernels/attention_padded.h"
#include "engine/kernels/attention_varlen.h"
#include "engine/model/fp8_linear.h"
#include "engine/model/linear_fast.h"

namespace engine {

int AttentionGrid::tokens() const {
  return row_start != nullptr ? row_start[batch->rows] : batch->num_slots();
}

common::Status SegmentAttentionForward(float* attn, float* lse, const float* q, const float* k,
                                       const float* v, const AttentionGrid& g,
                                       kernels::AttentionWorkspace* ws) {
  const PackedBatch& b = *g.batch;
  const int T = b.tokens_per_row, C = g.H * g.D;
  const long row_floats = static_cast<long>(T) * C;
  if (g.kind == AttentionKind::kPadded) {
    kernels::PaddedShape shape{b.rows, T, g.H, g.D, g.causal};
    return kernels::AttentionPaddedForward(attn, lse, q, k, v, g.key_mask, shape, ws);
  }
  for (int r = 0; r < b.rows; ++r) {
    const int real = b.RowTokens(r);
    const long off = g.row_start != nullptr ? static_cast<long>(g.row_start[r]) * C : r * row_floats;
    if (real > 0) {
      kernels::VarlenShape shape{real, g.H, g.D, g.causal};
      EMBODY_RETURN_IF_ERROR(
          kernels::AttentionVarlenForward(attn + off, lse + static_cast<long>(r) * g.H * T, q + off,
                                          k + off, v + off, b.CuSeqlens(r), shape, ws));
    }
    if (g.row_start == nullptr) {  // the slot layout's padding slots
      std::memset(attn + off + static_cast<long>(real) * C, 0,
                  sizeof(float) * static_cast<long>(T - real) * C);
    }
  }
  return common::Status::Ok();
}

common::Status SegmentAttentionBackward(float* dq, float* dk, float* dv, const float* dattn,
                                        const float* q, const float* k, const float* v,
                                        const float* attn, const float* lse, const AttentionGrid& g,
                                        kernels::AttentionWorkspace* ws) {
  const PackedBatch& b = *g.batch;
  const int T = b.tokens_per_row, C = g.H * g.D;
  const long row_floats = static_cast<long>(T) * C;
  if (g.kind == AttentionKind::kPadded) {
    kernels::PaddedShape shape{b.rows, T, g.H, g.D, g.causal};
    return kernels::AttentionPaddedBackward(dq, dk, dv, dattn, q, k, v, attn, lse, g.key_mask,
                                            shape, ws);
  }
  for (int r = 0; r < b.rows; ++r) {
    const int real = b.RowTokens(r);
    if (real == 0) continue;
    const long off = g.row_start != nullptr ? static_cast<long>(g.row_start[r]) * C : r * row_floats;
    kernels::VarlenShape shape{real, g.H, g.D, g.causal};
    EMBODY_RETURN_IF_ERROR(kernels::AttentionVarlenBackward(
        dq + off, dk + off, dv + off, dattn + off, q + off, k + off, v + off, attn + off,
        lse + static_cast<long>(r) * g.H * T, b.CuSeqlens(r), shape, ws));
  }
  return common::Status::Ok();
}

common::Status SelfAttentionForward(float* out, const AttentionActs& a, const float* inp,
                                    const float* w_qkv, const float* b_qkv, const float* w_proj,
                                    const float* b_proj, const AttentionGrid& g,
                                    kernels::AttentionWorkspace* ws, const AttentionFp8Weights& fp8,
                                    const AttentionFp8Compute& c) {
  const int N = g.tokens(), C = g.H * g.D;
  const long CC = static_cast<long>(C) * C;
  // Three products against the three slices of the fused weight write q, k, v straight into the
  // kernels' layout (no split copy).
  LinearForwardCompute(c.q, a.q, inp, w_qkv, fp8.q, b_qkv, N, C, C);
  LinearForwardCompute(c.k, a.k, inp, w_qkv + CC, fp8.k, b_qkv + C, N, C, C);
  LinearForwardCompute(c.v, a.v, inp, w_qkv + 2 * CC, fp8.v, b_qkv + 2 * C, N, C, C);
  EMBODY_RETURN_IF_ERROR(SegmentAttentionForward(a.attn, a.lse, a.q, a.k, a.v, g, ws));
  LinearForwardCompute(c.proj, out, a.attn, w_proj, fp8.proj, b_proj, N, C, C);
  return common::Status::Ok();
}

common::Status SelfAttentionBackward(float* dinp, float* dw_qkv, float* db_qkv, float* dw_proj,
                                     float* db_proj, const AttentionScratch& s, const float* dout,
                                     const AttentionActs& a, const float* inp, const float* w_qkv,
                                     const float* w_proj, const AttentionGrid& g,
                                     kernels::AttentionWorkspace* ws,
                                     const AttentionFp8Compute& c) {
  const int N = g.tokens(), C = g.H * g.D;
  const long NC = static_cast<long>(N) * C, CC = static_cast<long>(C) * C;
  // Backward in reverse order of the forward.
  LinearBackwardCompute(c.proj, s.dattn, dw_proj, db_proj, dout, a.attn, w_proj, N, C, C,
                        /*overwrite_dinp=*/true);
  std::memset(s.dq, 0, sizeof(float) * NC);
  std::memset(s.dk, 0, sizeof(float) * NC);
  std::memset(s.dv, 0, sizeof(float) * NC);
  EMBODY_RETURN_IF_ERROR(
      SegmentAttentionBackward(s.dq, s.dk, s.dv, s.dattn, a.q, a.k, a.v, a.attn, a.lse, g, ws));
  LinearBackwardCompute(c.q, dinp, dw_qkv, db_qkv, s.dq, inp, w_qkv, N, C, C);
  LinearBackwardCompute(c.k, dinp, dw_qkv + CC, db_qkv + C, s.dk, inp, w_qkv + CC, N, C, C);
  LinearBackwardCompute(c.v, dinp, dw_qkv + 2 * CC, db_qkv + 2 * C, s.dv, inp, w_qkv + 2 * CC, N, C,
                        C);
  return common::Status::Ok();
}

}  // namespace engine
