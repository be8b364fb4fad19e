#include "engine/model/fp8_linear.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/fp8/codec.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/model/linear_fast.h"

namespace engine {
namespace {

using fp8::Format;
using fp8::Fp8Matrix;

// Operands and products of one call, reused by every layer on the thread: a layer's Backward
// needs them only while it runs, and per-layer copies would cost the reference model hundreds of
// megabytes.
struct Scratch {
  Fp8Matrix a, b;             // the two quantised operands of a product
  Fp8Matrix wt;               // W's codes transposed (C, OC)
  std::vector<float> t1, t2;  // transposes of dY and X, a product to add
  std::vector<float> sum;
};
thread_local Scratch scratch;

void Check(const common::Status& s) {
  if (!s.ok()) {  // shapes come from the model, checked once per batch: a bug, not bad input
    std::fprintf(stderr, "fp8 compute: %s\n", s.ToString().c_str());
    std::abort();
  }
}

// t (cols, rows) = x (rows, cols)ᵀ, in 32 × 32 tiles so both sides stay in cache.
void Transpose(float* t, const float* x, int rows, int cols) {
  constexpr int kTile = 32;
  for (int r0 = 0; r0 < rows; r0 += kTile) {
    const int r1 = std::min(rows, r0 + kTile);
    for (int c0 = 0; c0 < cols; c0 += kTile) {
      const int c1 = std::min(cols, c0 + kTile);
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          t[static_cast<long>(c) * rows + r] = x[static_cast<long>(r) * cols + c];
        }
      }
    }
  }
}

void Resize(std::vector<float>* v, long n) {
  if (static_cast<long>(v->size()) < n) v->resize(n);
}

}  // namespace

const char* Fp8ScalingName(Fp8Scaling s) { return s == Fp8Scaling::kDelayed ? "delayed" : "block"; }

void AmaxHistory::Push(float amax) {
  ring_[next_] = amax;
  next_ = (next_ + 1) % static_cast<int>(ring_.size());
  filled_ = std::min(filled_ + 1, static_cast<int>(ring_.size()));
}

float AmaxHistory::Max() const {
  float m = 0.0f;
  for (int i = 0; i < filled_; ++i) m = std::max(m, ring_[i]);
  return m;
}

fp8::Fp8Stats QuantizeForCompute(const float* x, int rows, int cols, int block_rows, Format format,
                                 float tensor_scale, float amax, Fp8Matrix* out) {
  if (tensor_scale <= 0.0f) {
    auto s = fp8::QuantizeBlocks(x, rows, cols, block_rows, format, out);
    Check(s.status());
    return *s;
  }
  out->format = format;
  out->rows = rows;
  out->cols = cols;
  out->block_rows = block_rows;
  const size_t n = static_cast<size_t>(rows) * cols;
  out->codes.resize(n);
  out->scales.assign(static_cast<size_t>(out->RowBlocks()) * out->ColBlocks(), tensor_scale);
  fp8::EncodeCounts counts;
  fp8::EncodeFp8(format, x, n, out->codes.data(), 1.0f / tensor_scale, &counts);
  fp8::Fp8Stats st;
  st.elements = static_cast<int64_t>(n);
  st.amax = amax;
  st.scale_min = st.scale_max = tensor_scale;
  st.saturated = counts.saturated;
  st.underflowed = counts.underflowed;
  st.nan = counts.nan;
  return st;
}

void TransposeWeightCodes(const Fp8Matrix& m, Fp8Matrix* t) {
  t->format = m.format;
  t->rows = m.cols;
  t->cols = m.rows;
  t->block_rows = fp8::kBlock;
  t->codes.resize(m.codes.size());
  for (int r0 = 0; r0 < m.rows; r0 += 64) {
    const int r1 = std::min(m.rows, r0 + 64);
    for (int c0 = 0; c0 < m.cols; c0 += 64) {
      const int c1 = std::min(m.cols, c0 + 64);
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          t->codes[static_cast<size_t>(c) * m.rows + r] =
              m.codes[static_cast<size_t>(r) * m.cols + c];
        }
      }
    }
  }
  const int rb = m.RowBlocks(), cb = m.ColBlocks();  // t's grid is (cb, rb)
  t->scales.resize(m.scales.size());
  for (int i = 0; i < rb; ++i) {
    for (int j = 0; j < cb; ++j) t->scales[static_cast<size_t>(j) * rb + i] = m.scales[i * cb + j];
  }
}

Fp8Linear::Fp8Linear(const Fp8ComputeOptions& options)
    : options_(options),
      x_history_(options.history),
      w_history_(options.history),
      dy_history_(options.history) {}

float Fp8Linear::TensorScale(const AmaxHistory& h, Format f, float current) const {
  if (options_.scaling != Fp8Scaling::kDelayed) return 0.0f;
  return fp8::BlockScale(f, h.empty() ? current : h.Max());
}

void Fp8Linear::Forward(float* out, const float* inp, const float* weight, const float* bias, int B,
                        int C, int OC) {
  const bool delayed = options_.scaling == Fp8Scaling::kDelayed;
  const long BC = static_cast<long>(B) * C, OCC = static_cast<long>(OC) * C;
  // Delayed scaling needs this call's amax for the history; block scaling finds it per block.
  const float ax = delayed ? fp8::FiniteAmax(inp, BC) : 0.0f;
  const float aw = delayed ? fp8::FiniteAmax(weight, OCC) : 0.0f;
  x_scale_ = TensorScale(x_history_, Format::kE4M3, ax);
  x_amax_ = ax;
  const float w_scale = TensorScale(w_history_, Format::kE4M3, aw);
  Scratch& s = scratch;
  stats_.e4m3.Merge(QuantizeForCompute(inp, B, C, 1, Format::kE4M3, x_scale_, ax, &s.a));
  stats_.e4m3.Merge(
      QuantizeForCompute(weight, OC, C, fp8::kBlock, Format::kE4M3, w_scale, aw, &w8_));
  Check(fp8::MatmulFp8(out, s.a, w8_, bias));  // (B, OC)
  if (delayed) {
    x_history_.Push(ax);
    w_history_.Push(aw);
  }
  have_forward_ = true;
}

void Fp8Linear::Backward(float* dinp, float* dweight, float* dbias, const float* dout,
                         const float* inp, int B, int C, int OC, bool overwrite_dinp) {
  if (!have_forward_) {
    std::fprintf(stderr, "fp8 compute: Backward without a Forward\n");
    std::abort();
  }
  const bool delayed = options_.scaling == Fp8Scaling::kDelayed;
  const long BC = static_cast<long>(B) * C, BOC = static_cast<long>(B) * OC,
             OCC = static_cast<long>(OC) * C;
  const float ady = delayed ? fp8::FiniteAmax(dout, BOC) : 0.0f;
  const float dy_scale = TensorScale(dy_history_, Format::kE5M2, ady);
  Scratch& s = scratch;

  // dX (B, C) = dY (B, OC) · W: K = OC, W's codes transposed to (C, OC).
  if (dinp != nullptr) {
    stats_.e5m2.Merge(QuantizeForCompute(dout, B, OC, 1, Format::kE5M2, dy_scale, ady, &s.a));
    TransposeWeightCodes(w8_, &s.wt);
    if (overwrite_dinp) {
      Check(fp8::MatmulFp8(dinp, s.a, s.wt, nullptr));
    } else {
      Resize(&s.sum, BC);
      Check(fp8::MatmulFp8(s.sum.data(), s.a, s.wt, nullptr));
      for (long i = 0; i < BC; ++i) dinp[i] += s.sum[i];
    }
  }

  // dW (OC, C) = dYᵀ (OC, B) · Xᵀ (C, B)ᵀ: K = B, both operands tiled along the tokens.
  Resize(&s.t1, BOC);
  Resize(&s.t2, BC);
  Transpose(s.t1.data(), dout, B, OC);
  Transpose(s.t2.data(), inp, B, C);
  stats_.e5m2.Merge(QuantizeForCompute(s.t1.data(), OC, B, 1, Format::kE5M2, dy_scale, ady, &s.a));
  stats_.e4m3.Merge(
      QuantizeForCompute(s.t2.data(), C, B, 1, Format::kE4M3, x_scale_, x_amax_, &s.b));
  Resize(&s.sum, OCC);
  Check(fp8::MatmulFp8(s.sum.data(), s.a, s.b, nullptr));
  for (long i = 0; i < OCC; ++i) dweight[i] += s.sum[i];

  if (dbias != nullptr) {
    for (int b = 0; b < B; ++b) {
      const float* row = dout + static_cast<long>(b) * OC;
      for (int o = 0; o < OC; ++o) dbias[o] += row[o];
    }
  }
  if (delayed) dy_history_.Push(ady);
}

Fp8ComputeStats Fp8Linear::TakeStats() {
  Fp8ComputeStats out = stats_;
  stats_ = Fp8ComputeStats{};
  return out;
}

void LinearForwardCompute(Fp8Linear* fp8, float* out, const float* inp, const float* weight,
                          const fp8::Fp8Matrix* weight8, const float* bias, int B, int C, int OC) {
  if (fp8 != nullptr) {
    fp8->Forward(out, inp, weight, bias, B, C, OC);
  } else {
    LinearForwardMaybeFp8(out, inp, weight, weight8, bias, B, C, OC);
  }
}

void LinearBackwardCompute(Fp8Linear* fp8, float* dinp, float* dweight, float* dbias,
                           const float* dout, const float* inp, const float* weight, int B, int C,
                           int OC, bool overwrite_dinp) {
  if (fp8 != nullptr) {
    fp8->Backward(dinp, dweight, dbias, dout, inp, B, C, OC, overwrite_dinp);
  } else {
    LinearBackwardFast(dinp, dweight, dbias, dout, inp, weight, B, C, OC, overwrite_dinp);
  }
}

}  // namespace engine
