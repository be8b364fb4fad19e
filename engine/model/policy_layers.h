// The layers of the policy transformer that are not matrix products or attention, as
// Forward/Backward pairs over float arrays (llm.c style, like engine/model/layers.h).
//
// Every backward ACCUMULATES (+=) into its gradient outputs; callers zero gradient buffers once
// per step. Shapes in comments are row-major: N = token slots, C = d_model, M = MLP width,
// Na = action tokens, A = action_dim. No allocation and no shape checks inside; the model checks
// once per batch.
#pragma once

#include <cstdint>

namespace engine::fp8 {
struct Fp8Matrix;
}

namespace engine {

class Fp8Linear;

inline constexpr float kRmsNormEps = 1e-5f;
inline constexpr int kTimeFeatures = 64;  // sinusoidal features of the flow-matching time

// RMSNorm: out = inp · rstd · weight, rstd = 1 / sqrt(mean(inp²) + eps), per row.
// out, inp (N, C); weight (C); rstd (N) is written for the backward.
void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int N, int C);
void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, int N, int C);

// Embedding lookup, added to out: out[i] += table[ids[i]]; rows with ids[i] < 0 are untouched.
// out (N, C), ids (N), table (rows, C).
void EmbeddingForward(float* out, const int32_t* ids, const float* table, int N, int C);
// dtable[ids[i]] += dout[i]: the scatter-add that mirrors the gather.
void EmbeddingBackward(float* dtable, const int32_t* ids, const float* dout, int N, int C);

// Row gather out[i] = inp[rows[i]] and its adjoint, the scatter-add out[rows[i]] += inp[i].
// Used to move tokens of one modality between the slot grid and a dense (n, C) block.
void GatherRows(float* out, const float* inp, const int32_t* rows, int n, int C);
void ScatterAddRows(float* out, const float* inp, const int32_t* rows, int n, int C);

// Residual: out = a + b (out may alias a). Backward: da += dout, db += dout.
void ResidualForward(float* out, const float* a, const float* b, long n);
void ResidualBackward(float* da, float* db, const float* dout, long n);

// Sinusoidal features of the flow-matching time, out (n, kTimeFeatures):
//   out[j] = sin(1000·t·f_j), out[32 + j] = cos(1000·t·f_j), f_j = 10000^(−j/32), j < 32,
// computed in double (t ∈ [0, 1] is scaled to the 0..1000 range DiT-style timestep embeddings
// were designed for). No parameters and no gradient: t is data.
void TimeFeatures(float* out, const float* t, int n);

// GELU MLP: out = fc2(gelu(fc1(inp))). inp, out (N, C); pre, act (N, M) are saved for backward
// (before and after GELU). w1 (M, C), b1 (M), w2 (C, M), b2 (C). Matrix products use the Eigen
// path (linear_fast.h).
// fc1/fc2 (optional): FP8 weights used instead of w1/w2, for inference from a quantised policy.
struct MlpFp8Weights {
  const fp8::Fp8Matrix* fc1 = nullptr;
  const fp8::Fp8Matrix* fc2 = nullptr;
};
// FP8 compute in training (fp8_linear.h): fc1's and fc2's FP8 state, null for fp32; the same
// objects go to the forward and the backward that follows it.
struct MlpFp8Compute {
  Fp8Linear* fc1 = nullptr;
  Fp8Linear* fc2 = nullptr;
};
void GeluMlpForward(float* out, float* pre, float* act, const float* inp, const float* w1,
                    const float* b1, const float* w2, const float* b2, int N, int C, int M,
                    const MlpFp8Weights& fp8 = {}, const MlpFp8Compute& compute = {});
// dpre_scratch (N, M) is overwritten; dinp, dw1, db1, dw2, db2 accumulate.
void GeluMlpBackward(float* dinp, float* dw1, float* db1, float* dw2, float* db2,
                     float* dpre_scratch, const float* dout, const float* inp, const float* pre,
                     const float* act, const float* w1, const float* w2, int N, int C, int M,
                     const MlpFp8Compute& compute = {});

// Action head on the action tokens only: pred[a] = hidden[rows[a]] · weightᵀ + bias.
// hidden (N, C), rows (Na) slot of each action token, gathered (Na, C) is saved for backward,
// weight (A, C), bias (A), pred (Na, A).
// weight8 (optional): the FP8 weight used instead of `weight`.
void ActionHeadForward(float* pred, float* gathered, const float* hidden, const int32_t* rows,
                       const float* weight, const float* bias, int Na, int C, int A,
                       const fp8::Fp8Matrix* weight8 = nullptr);
// dgathered_scratch (Na, C) is overwritten; dhidden (scattered), dweight, dbias accumulate.
void ActionHeadBackward(float* dhidden, float* dweight, float* dbias, float* dgathered_scratch,
                        const float* dpred, const float* gathered, const int32_t* rows,
                        const float* weight, int Na, int C, int A);

// Flow-matching loss, weighted per action token:
//   loss = Σ_a weight[a] · ‖pred[a] − target[a]‖² / normalizer.
// pred, target (Na, A), weight (Na). Accumulates in double.
double FlowLossForward(const float* pred, const float* target, const float* weight, int Na, int A,
                       double normalizer);
// dpred += dloss · 2·weight·(pred − target) / normalizer.
void FlowLossBackward(float* dpred, const float* pred, const float* target, const float* weight,
                      int Na, int A, double normalizer, float dloss = 1.0f);

}  // namespace engine
