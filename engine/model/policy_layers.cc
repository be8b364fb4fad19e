#include "engine/model/policy_layers.h"

#include <cmath>
#include <cstring>

#include <Eigen/Core>

#include "engine/model/fp8_linear.h"
#include "engine/model/linear_fast.h"

namespace engine {

void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int N, int C) {
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<long>(i) * C;
    float* y = out + static_cast<long>(i) * C;
    // Eigen's reductions vectorise; a plain loop's float sum may not be reordered by the compiler.
    const float ss = Eigen::Map<const Eigen::ArrayXf>(x, C).square().sum();
    const float r = 1.0f / std::sqrt(ss / C + kRmsNormEps);
    for (int c = 0; c < C; ++c) y[c] = x[c] * r * weight[c];
    rstd[i] = r;
  }
}

void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, int N, int C) {
  // y_c = g_c x_c r with r = (Σx²/C + eps)^(-1/2), dr/dx_j = −r³ x_j / C, so
  // dx_j = r (g_j dy_j − x_j r² (Σ_c g_c dy_c x_c) / C).
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<long>(i) * C;
    const float* dy = dout + static_cast<long>(i) * C;
    float* dx = dinp + static_cast<long>(i) * C;
    const float r = rstd[i];
    const float dot =
        (Eigen::Map<const Eigen::ArrayXf>(weight, C) * Eigen::Map<const Eigen::ArrayXf>(dy, C) *
         Eigen::Map<const Eigen::ArrayXf>(x, C))
            .sum();
    for (int c = 0; c < C; ++c) dweight[c] += dy[c] * x[c] * r;
    const float k = r * r * dot / C;
    for (int c = 0; c < C; ++c) dx[c] += r * (weight[c] * dy[c] - x[c] * k);
  }
}

void EmbeddingForward(float* out, const int32_t* ids, const float* table, int N, int C) {
  for (int i = 0; i < N; ++i) {
    if (ids[i] < 0) continue;
    const float* row = table + static_cast<long>(ids[i]) * C;
    float* y = out + static_cast<long>(i) * C;
    for (int c = 0; c < C; ++c) y[c] += row[c];
  }
}

void EmbeddingBackward(float* dtable, const int32_t* ids, const float* dout, int N, int C) {
  for (int i = 0; i < N; ++i) {
    if (ids[i] < 0) continue;
    float* drow = dtable + static_cast<long>(ids[i]) * C;
    const float* dy = dout + static_cast<long>(i) * C;
    for (int c = 0; c < C; ++c) drow[c] += dy[c];
  }
}

void GatherRows(float* out, const float* inp, const int32_t* rows, int n, int C) {
  for (int i = 0; i < n; ++i) {
    std::memcpy(out + static_cast<long>(i) * C, inp + static_cast<long>(rows[i]) * C,
                sizeof(float) * C);
  }
}

void ScatterAddRows(float* out, const float* inp, const int32_t* rows, int n, int C) {
  for (int i = 0; i < n; ++i) {
    float* y = out + static_cast<long>(rows[i]) * C;
    const float* x = inp + static_cast<long>(i) * C;
    for (int c = 0; c < C; ++c) y[c] += x[c];
  }
}

void ResidualForward(float* out, const float* a, const float* b, long n) {
  for (long i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void ResidualBackward(float* da, float* db, const float* dout, long n) {
  for (long i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

void TimeFeatures(float* out, const float* t, int n) {
  constexpr int kHalf = kTimeFeatures / 2;
  double freq[kHalf];
  for (int j = 0; j < kHalf; ++j) freq[j] = std::exp(-std::log(10000.0) * j / kHalf);
  for (int i = 0; i < n; ++i) {
    float* y = out + static_cast<long>(i) * kTimeFeatures;
    for (int j = 0; j < kHalf; ++j) {
      const double arg = 1000.0 * static_cast<double>(t[i]) * freq[j];
      y[j] = static_cast<float>(std::sin(arg));
      y[kHalf + j] = static_cast<float>(std::cos(arg));
    }
  }
}

void GeluMlpForward(float* out, float* pre, float* act, const float* inp, const float* w1,
                    const float* b1, const float* w2, const float* b2, int N, int C, int M,
                    const MlpFp8Weights& fp8, const MlpFp8Compute& c) {
  LinearForwardCompute(c.fc1, pre, inp, w1, fp8.fc1, b1, N, C, M);  // (N, M)
  GeluForwardFast(act, pre, static_cast<long>(N) * M);
  LinearForwardCompute(c.fc2, out, act, w2, fp8.fc2, b2, N, M, C);  // (N, C)
}

void GeluMlpBackward(float* dinp, float* dw1, float* db1, float* dw2, float* db2,
                     float* dpre_scratch, const float* dout, const float* inp, const float* pre,
                     const float* act, const float* w1, const float* w2, int N, int C, int M,
                     const MlpFp8Compute& c) {
  // dact (N, M) written into the scratch, then GELU's derivative scales it into dpre in place.
  const long NM = static_cast<long>(N) * M;
  LinearBackwardCompute(c.fc2, dpre_scratch, dw2, db2, dout, act, w2, N, M, C,
                        /*overwrite_dinp=*/true);
  GeluGradInPlace(dpre_scratch, pre, NM);
  LinearBackwardCompute(c.fc1, dinp, dw1, db1, dpre_scratch, inp, w1, N, C, M);
}

void ActionHeadForward(float* pred, float* gathered, const float* hidden, const int32_t* rows,
                       const float* weight, const float* bias, int Na, int C, int A,
                       const fp8::Fp8Matrix* weight8) {
  GatherRows(gathered, hidden, rows, Na, C);                                 // (Na, C)
  LinearForwardMaybeFp8(pred, gathered, weight, weight8, bias, Na, C, A);  // (Na, A)
}

void ActionHeadBackward(float* dhidden, float* dweight, float* dbias, float* dgathered_scratch,
                        const float* dpred, const float* gathered, const int32_t* rows,
                        const float* weight, int Na, int C, int A) {
  LinearBackwardFast(dgathered_scratch, dweight, dbias, dpred, gathered, weight, Na, C, A,
                     /*overwrite_dinp=*/true);
  ScatterAddRows(dhidden, dgathered_scratch, rows, Na, C);
}

double FlowLossForward(const float* pred, const float* target, const float* weight, int Na, int A,
                       double normalizer) {
  double acc = 0.0;
  for (int a = 0; a < Na; ++a) {
    double sq = 0.0;
    for (int d = 0; d < A; ++d) {
      const double diff = static_cast<double>(pred[a * A + d]) - target[a * A + d];
      sq += diff * diff;
    }
    acc += weight[a] * sq;
  }
  return acc / normalizer;
}

void FlowLossBackward(float* dpred, const float* pred, const float* target, const float* weight,
                      int Na, int A, double normalizer, float dloss) {
  for (int a = 0; a < Na; ++a) {
    const float s = static_cast<float>(2.0 * dloss * weight[a] / normalizer);
    for (int d = 0; d < A; ++d) dpred[a * A + d] += s * (pred[a * A + d] - target[a * A + d]);
  }
}

}  // namespace engine
