// FP8 compute for one Linear layer in training (engine.fp8.compute, docs/fp8.md): the same
// contract as LinearForwardFast/LinearBackwardFast (linear_fast.h), with every matrix product's
// operands quantised to FP8 and multiplied by fp8::MatmulFp8 (fp32 accumulation along K):
//
//   forward   Y (B, OC)  = X (B, C) · Wᵀ           X E4M3 in 1 × 128 tiles along C,
//                                                   W (OC, C) E4M3 in 128 × 128 blocks
//   backward  dX (B, C)  = dY (B, OC) · W           dY E5M2 in 1 × 128 tiles along OC, W the
//                                                   forward's codes transposed (same blocks)
//             dW (OC, C) = dYᵀ (OC, B) · X (B, C)   dYᵀ E5M2 and Xᵀ E4M3, both in 1 × 128 tiles
//                                                   along the token dimension B
//             db (OC)    = column sums of dY, fp32
//
// The master weights, their gradients and the optimiser stay fp32: only the products' inputs
// are rounded. Scaling (Fp8Scaling):
//   kBlock    current scaling, DeepSeek-V3's recipe: each block's scale from its own amax in this
//             very call, so nothing saturates and an outlier costs precision only in its block;
//   kDelayed  Transformer Engine's recipe: one scale per tensor (X, W, dY) from the largest amax
//             of its last `history` calls (not this one's), so a value beyond that range
//             saturates (and is counted); the first call, with no history, uses its own amax.
// Every quantisation is counted in Fp8ComputeStats (X and dY twice a step: once per layout).
// Not thread-safe; one object per Linear of the model (the saved weight codes and histories
// are per layer); scratch buffers are shared per thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/fp8/block_quant.h"

namespace engine {

enum class Fp8Scaling { kBlock, kDelayed };
const char* Fp8ScalingName(Fp8Scaling s);  // "block", "delayed"

struct Fp8ComputeOptions {
  Fp8Scaling scaling = Fp8Scaling::kBlock;
  int history = 16;  // calls of amax kept per tensor (kDelayed); ≥ 1
};

// The last `length` amaxes of one tensor, oldest overwritten first.
class AmaxHistory {
 public:
  explicit AmaxHistory(int length = 16) : ring_(length > 0 ? length : 1, 0.0f) {}
  void Push(float amax);
  bool empty() const { return filled_ == 0; }
  int size() const { return filled_; }
  float Max() const;  // 0 when empty

 private:
  std::vector<float> ring_;
  int next_ = 0;
  int filled_ = 0;
};

// What FP8 compute quantised, by format: E4M3 holds activations and weights, E5M2 the output
// gradients. For step events (engine/policy/ptq.h's Fp8StatsJson shape).
struct Fp8ComputeStats {
  fp8::Fp8Stats e4m3;
  fp8::Fp8Stats e5m2;
  void Merge(const Fp8ComputeStats& other) {
    e4m3.Merge(other.e4m3);
    e5m2.Merge(other.e5m2);
  }
};

class Fp8Linear {
 public:
  explicit Fp8Linear(const Fp8ComputeOptions& options = {});

  // out (B, OC) = inp (B, C) · weight (OC, C)ᵀ + bias (may be null). Keeps W's codes for the
  // Backward that follows (the weight must not change in between).
  void Forward(float* out, const float* inp, const float* weight, const float* bias, int B, int C,
               int OC);
  // Accumulates dinp (B, C) += dY · W (dinp may be null; with overwrite_dinp, =), dweight
  // (OC, C) += dYᵀ · X, dbias (OC) += column sums of dY (may be null). inp is the Forward's.
  void Backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                int B, int C, int OC, bool overwrite_dinp = false);

  // The statistics since the last call, and resets them.
  Fp8ComputeStats TakeStats();
  const AmaxHistory& x_history() const { return x_history_; }
  const AmaxHistory& w_history() const { return w_history_; }
  const AmaxHistory& dy_history() const { return dy_history_; }

 private:
  // The per-tensor scale for kDelayed (0 for kBlock: per-block scales), from the history or, if
  // it is empty, from `current` amax.
  float TensorScale(const AmaxHistory& h, fp8::Format f, float current) const;

  Fp8ComputeOptions options_;
  AmaxHistory x_history_, w_history_, dy_history_;
  fp8::Fp8Matrix w8_;     // the Forward's weight codes (OC, C)
  float x_scale_ = 0.0f;  // the Forward's tensor scale for X (kDelayed), reused for Xᵀ
  float x_amax_ = 0.0f;   // and X's amax (kDelayed), for Xᵀ's statistics
  bool have_forward_ = false;
  Fp8ComputeStats stats_;
};

// The whole (rows, cols) matrix quantised in block_rows × 128 blocks: with tensor_scale > 0
// every block gets that scale (values beyond it saturate), else each block its own (block_quant.h).
// amax is x's finite amax when the caller has it (tensor_scale > 0), for the statistics.
fp8::Fp8Stats QuantizeForCompute(const float* x, int rows, int cols, int block_rows,
                                 fp8::Format format, float tensor_scale, float amax,
                                 fp8::Fp8Matrix* out);

// t (cols, rows) = the transpose of m (rows, cols), codes and scale grid; m has
// block_rows == 128, so the blocks map onto blocks and every element keeps its value.
void TransposeWeightCodes(const fp8::Fp8Matrix& m, fp8::Fp8Matrix* t);

// The Linear product through `fp8` when it is not null, else LinearForwardMaybeFp8 (fp32, or
// the inference path's fp8 weights when weight8 is not null; linear_fast.h): what the
// transformer's layers call, so fp8 compute is one pointer per layer.
void LinearForwardCompute(Fp8Linear* fp8, float* out, const float* inp, const float* weight,
                          const fp8::Fp8Matrix* weight8, const float* bias, int B, int C, int OC);
void LinearBackwardCompute(Fp8Linear* fp8, float* dinp, float* dweight, float* dbias,
                           const float* dout, const float* inp, const float* weight, int B, int C,
                           int OC, bool overwrite_dinp = false);

}  // namespace engine
