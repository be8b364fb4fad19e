// Variable-length attention over one packed row: T tokens holding several samples back to back,
// segment s spanning tokens [cu_seqlens[s], cu_seqlens[s+1]). Attention is block-diagonal (a token
// attends only to tokens of its own segment), optionally causal within the segment; scale
// 1/sqrt(D).
//
// The kernel is FlashAttention-2 style on the CPU: per head, per segment, a tile of kQueryTile
// queries meets tiles of kKeyTile keys; a running max and sum (online softmax) replace the full
// score matrix, so memory is O(T·D) for any segment length. Backward recomputes the
// probabilities from the saved log-sum-exp. Single-threaded; parallelism comes from data-parallel
// ranks (or callers running rows/heads on several workspaces).
//
// Layouts (row-major): q, k, v, out, dout, dq, dk, dv (T, H, D); lse (H, T), natural log of
// Σ exp(scale · q·k) over the keys each query attends to.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "engine/kernels/attention_workspace.h"

namespace engine::kernels {

inline constexpr int kQueryTile = 64;
inline constexpr int kKeyTile = 64;

struct VarlenShape {
  int T = 0;  // tokens in the row: cu_seqlens.back()
  int H = 0;  // heads
  int D = 0;  // head dim
  bool causal = false;
};

// Checks cu_seqlens (cu[0] = 0, non-decreasing, cu.back() = T) and H, D ≥ 1. Both kernels call
// it once at entry; callers that check earlier may call it themselves.
// The copy of the kernels this process runs ("sse2", "avx2" or "avx512"), chosen once from the
// CPU (engine/cpu/cpu_path.h; EMBODY_CPU_PATH=scalar forces the baseline copy).
const char* AttentionKernelsName();

common::Status CheckVarlenShape(const VarlenShape& shape, std::span<const int32_t> cu_seqlens);

// out (T, H, D), lse (H, T) are overwritten.
common::Status AttentionVarlenForward(float* out, float* lse, const float* q, const float* k,
                                      const float* v, std::span<const int32_t> cu_seqlens,
                                      const VarlenShape& shape, AttentionWorkspace* ws);

// Accumulates (+=) the gradients into dq, dk, dv (T, H, D), as every engine backward does;
// callers zero them once per step. out and lse are the forward's results.
common::Status AttentionVarlenBackward(float* dq, float* dk, float* dv, const float* dout,
                                       const float* q, const float* k, const float* v,
                                       const float* out, const float* lse,
                                       std::span<const int32_t> cu_seqlens,
                                       const VarlenShape& shape, AttentionWorkspace* ws);

}  // namespace engine::kernels
