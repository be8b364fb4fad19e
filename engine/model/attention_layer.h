// The attention sub-layer of a transformer block: fused QKV projection, multi-head attention
// within each sample's segment, output projection. Attention itself runs on the kernels of
// engine/kernels: the tiled varlen kernel per row over the row's cu_seqlens (the packed path), or
// the padded baseline kernel with a key padding mask (one sample per row).
//
// Layouts: the N tokens of a PackedBatch, row-major. inp, out, q, k, v, attn (N, C) with
// C = H·D, each row's tokens being the kernels' (T, H, D). Either the N = rows·T token slots
// (padding included), or, with AttentionGrid::row_start, only the real tokens, the rows back to
// back (what the model computes on: no product or pass spends work on padding). lse (rows, H, T)
// either way. The fused QKV weight is (3C, C): rows [0, C) make q, [C, 2C) k, [2C, 3C) v
// (PyTorch's Linear(C, 3C) followed by split), head h owning features [h·D, (h+1)·D) of each.
//
// Padding: the varlen path runs the kernel on each row's real tokens only and, in the slot
// layout, writes zeros to the attention output of padding slots; the padded path computes padding queries as a padded
// framework would (their outputs are meaningless and never reach a real token or the loss).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "engine/kernels/attention_workspace.h"
#include "engine/model/packed_batch.h"

namespace engine::fp8 {
struct Fp8Matrix;
}

namespace engine {

class Fp8Linear;

enum class AttentionKind { kVarlen, kPadded };

struct AttentionGrid {
  const PackedBatch* batch = nullptr;  // rows, T and the segments
  int H = 0;
  int D = 0;
  bool causal = false;
  AttentionKind kind = AttentionKind::kVarlen;
  const uint8_t* key_mask = nullptr;  // (rows, T), nonzero = real token; padded path only
  // Varlen only: (rows + 1) offsets of the compact layout, row r's real tokens at
  // [row_start[r], row_start[r + 1]). Null: the slot layout, row r at r·T.
  const int32_t* row_start = nullptr;

  // Tokens in the layout: row_start[rows], or rows·T.
  int tokens() const;
};

// attn (N, C) = attention(q, k, v) within segments; lse (rows, H, T) saved for backward.
common::Status SegmentAttentionForward(float* attn, float* lse, const float* q, const float* k,
                                       const float* v, const AttentionGrid& grid,
                                       kernels::AttentionWorkspace* ws);
// Accumulates into dq, dk, dv (N, C).
common::Status SegmentAttentionBackward(float* dq, float* dk, float* dv, const float* dattn,
                                        const float* q, const float* k, const float* v,
                                        const float* attn, const float* lse,
                                        const AttentionGrid& grid, kernels::AttentionWorkspace* ws);

// Saved activations of one attention sub-layer, each (N, C) except lse (rows, H, T).
struct AttentionActs {
  float* q;
  float* k;
  float* v;
  float* attn;
  float* lse;
};

// FP8 weights of one attention sub-layer for inference from a quantised policy: q, k and v are
// the three (C, C) row slices of the fused qkv weight, each with its own 128 x 128 blocks; a null
// pointer means that product runs on the fp32 weight.
struct AttentionFp8Weights {
  const fp8::Fp8Matrix* q = nullptr;
  const fp8::Fp8Matrix* k = nullptr;
  const fp8::Fp8Matrix* v = nullptr;
  const fp8::Fp8Matrix* proj = nullptr;
};

// FP8 compute in training (fp8_linear.h): the four products' FP8 state, one per product (q, k
// and v each have their own scales); null pointers run that product in fp32. The same objects go
// to the forward and the backward that follows it.
struct AttentionFp8Compute {
  Fp8Linear* q = nullptr;
  Fp8Linear* k = nullptr;
  Fp8Linear* v = nullptr;
  Fp8Linear* proj = nullptr;
};

// out (N, C) = proj(attention(qkv(inp))). w_qkv (3C, C), b_qkv (3C), w_proj (C, C), b_proj (C).
common::Status SelfAttentionForward(float* out, const AttentionActs& acts, const float* inp,
                                    const float* w_qkv, const float* b_qkv, const float* w_proj,
                                    const float* b_proj, const AttentionGrid& grid,
                                    kernels::AttentionWorkspace* ws,
                                    const AttentionFp8Weights& fp8 = {},
                                    const AttentionFp8Compute& compute = {});

// Scratch for the backward: four (N, C) buffers, overwritten.
struct AttentionScratch {
  float* dattn;
  float* dq;
  float* dk;
  float* dv;
};

// Accumulates into dinp (N, C) and the parameter gradients.
common::Status SelfAttentionBackward(float* dinp, float* dw_qkv, float* db_qkv, float* dw_proj,
                                     float* db_proj, const AttentionScratch& scratch,
                                     const float* dout, const AttentionActs& acts, const float* inp,
                                     const float* w_qkv, const float* w_proj,
                                     const AttentionGrid& grid, kernels::AttentionWorkspace* ws,
                                     const AttentionFp8Compute& compute = {});

}  // namespace engine
