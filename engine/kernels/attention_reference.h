// Naive float64 attention over packed segments: the reference the fast kernels are tested
// against. Per segment and head it forms the full score matrix and a plain softmax; backward is
// the textbook chain rule through that softmax. Slow, simple and exact to ~1e-15.
//
// Same layouts and semantics as attention_varlen.h, in double: q, k, v, out, dout, dq, dk, dv
// (T, H, D); lse (H, T). cu_seqlens must be valid (see CheckVarlenShape); nothing is checked.
#pragma once

#include <cstdint>
#include <span>

namespace engine::kernels {

void AttentionReferenceForward(double* out, double* lse, const double* q, const double* k,
                               const double* v, std::span<const int32_t> cu_seqlens, int T, int H,
                               int D, bool causal);

// Overwrites dq, dk, dv.
void AttentionReferenceBackward(double* dq, double* dk, double* dv, const double* dout,
                                const double* q, const double* k, const double* v,
                                std::span<const int32_t> cu_seqlens, int T, int H, int D,
                                bool causal);

}  // namespace engine::kernels
