#include "engine/kernels/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace engine::kernels {
namespace {

// Softmax probabilities p (len, len) of one segment and head; returns them with lse (len).
void Probabilities(std::vector<double>* p, std::vector<double>* lse, const double* q,
                   const double* k, int s0, int len, int H, int D, int h, bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  p->assign(static_cast<size_t>(len) * len, 0.0);
  lse->assign(len, 0.0);
  auto at = [&](const double* x, int t) { return x + (static_cast<long>(s0 + t) * H + h) * D; };
  for (int i = 0; i < len; ++i) {
    const int visible = causal ? i + 1 : len;
    double mx = -INFINITY;
    for (int j = 0; j < visible; ++j) {
      double s = 0.0;
      for (int e = 0; e < D; ++e) s += at(q, i)[e] * at(k, j)[e];
      (*p)[static_cast<size_t>(i) * len + j] = s * scale;
      mx = std::max(mx, s * scale);
    }
    double sum = 0.0;
    for (int j = 0; j < visible; ++j) sum += std::exp((*p)[static_cast<size_t>(i) * len + j] - mx);
    for (int j = 0; j < visible; ++j) {
      double& x = (*p)[static_cast<size_t>(i) * len + j];
      x = std::exp(x - mx) / sum;
    }
    (*lse)[i] = mx + std::log(sum);
  }
}

}  // namespace

void AttentionReferenceForward(double* out, double* lse, const double* q, const double* k,
                               const double* v, std::span<const int32_t> cu_seqlens, int T, int H,
                               int D, bool causal) {
  std::vector<double> p, l;
  for (size_t seg = 0; seg + 1 < cu_seqlens.size(); ++seg) {
    const int s0 = cu_seqlens[seg], len = cu_seqlens[seg + 1] - s0;
    for (int h = 0; h < H; ++h) {
      Probabilities(&p, &l, q, k, s0, len, H, D, h, causal);
      for (int i = 0; i < len; ++i) {
        double* o = out + (static_cast<long>(s0 + i) * H + h) * D;
        for (int e = 0; e < D; ++e) {
          double acc = 0.0;
          for (int j = 0; j < len; ++j) {
            acc += p[static_cast<size_t>(i) * len + j] *
                   v[(static_cast<long>(s0 + j) * H + h) * D + e];
          }
          o[e] = acc;
        }
        lse[static_cast<long>(h) * T + s0 + i] = l[i];
      }
    }
  }
}

void AttentionReferenceBackward(double* dq, double* dk, double* dv, const double* dout,
                                const double* q, const double* k, const double* v,
                                std::span<const int32_t> cu_seqlens, int T, int H, int D,
                                bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::fill(dq, dq + static_cast<long>(T) * H * D, 0.0);
  std::fill(dk, dk + static_cast<long>(T) * H * D, 0.0);
  std::fill(dv, dv + static_cast<long>(T) * H * D, 0.0);
  std::vector<double> p, l, dp;
  for (size_t seg = 0; seg + 1 < cu_seqlens.size(); ++seg) {
    const int s0 = cu_seqlens[seg], len = cu_seqlens[seg + 1] - s0;
    auto idx = [&](int t, int h) { return (static_cast<long>(s0 + t) * H + h) * D; };
    for (int h = 0; h < H; ++h) {
      Probabilities(&p, &l, q, k, s0, len, H, D, h, causal);
      // dP_ij = dout_i · v_j;  dV_j = Σ_i P_ij dout_i
      dp.assign(static_cast<size_t>(len) * len, 0.0);
      for (int i = 0; i < len; ++i) {
        for (int j = 0; j < len; ++j) {
          const double pij = p[static_cast<size_t>(i) * len + j];
          double s = 0.0;
          for (int e = 0; e < D; ++e) {
            s += dout[idx(i, h) + e] * v[idx(j, h) + e];
            dv[idx(j, h) + e] += pij * dout[idx(i, h) + e];
          }
          dp[static_cast<size_t>(i) * len + j] = s;
        }
      }
      // Softmax backward row by row: dS_ij = P_ij (dP_ij − Σ_j' P_ij' dP_ij').
      for (int i = 0; i < len; ++i) {
        double row = 0.0;
        for (int j = 0; j < len; ++j) {
          row += p[static_cast<size_t>(i) * len + j] * dp[static_cast<size_t>(i) * len + j];
        }
        for (int j = 0; j < len; ++j) {
          const double ds =
              p[static_cast<size_t>(i) * len + j] * (dp[static_cast<size_t>(i) * len + j] - row);
          for (int e = 0; e < D; ++e) {
            dq[idx(i, h) + e] += scale * ds * k[idx(j, h) + e];
            dk[idx(j, h) + e] += scale * ds * q[idx(i, h) + e];
          }
        }
      }
    }
  }
}

}  // namespace engine::kernels
