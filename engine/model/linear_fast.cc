#include "engine/model/linear_fast.h"

#include <algorithm>
#include <chrono>

#include <Eigen/Core>

namespace engine {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using ConstRowVectorMap = Eigen::Map<const Eigen::RowVectorXf>;

}  // namespace

void LinearForwardFast(float* out, const float* inp, const float* weight, const float* bias, int B,
                       int C, int OC) {
  Eigen::Map<RowMatrix> y(out, B, OC);
  ConstMatrixMap x(inp, B, C);
  ConstMatrixMap w(weight, OC, C);
  // Eigen zero-fills the destination of `=` before accumulating into it; starting from the bias
  // instead makes that pass useful and saves the separate bias pass.
  if (bias != nullptr) {
    y.rowwise() = ConstRowVectorMap(bias, OC);
    y.noalias() += x * w.transpose();
  } else {
    y.noalias() = x * w.transpose();
  }
}

void LinearBackwardFast(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, int B, int C, int OC,
                        bool overwrite_dinp) {
  ConstMatrixMap dy(dout, B, OC);
  ConstMatrixMap x(inp, B, C);
  ConstMatrixMap w(weight, OC, C);
  if (dinp != nullptr) {
    Eigen::Map<RowMatrix> dx(dinp, B, C);
    if (overwrite_dinp) {
      dx.noalias() = dy * w;
    } else {
      dx.noalias() += dy * w;
    }
  }
  Eigen::Map<RowMatrix> dw(dweight, OC, C);
  dw.noalias() += dy.transpose() * x;
  if (dbias != nullptr) {
    // Row by row: contiguous, vectorised adds (a column-wise reduction over a row-major map
    // strides through memory).
    for (int b = 0; b < B; ++b) {
      const float* row = dout + static_cast<long>(b) * OC;
      for (int o = 0; o < OC; ++o) dbias[o] += row[o];
    }
  }
}

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr long kGeluChunk = 4096;  // elements per pass: keeps the temporaries in L1/L2
}  // namespace

void GeluForwardFast(float* out, const float* inp, long N) {
  for (long i0 = 0; i0 < N; i0 += kGeluChunk) {
    const long n = std::min(kGeluChunk, N - i0);
    Eigen::Map<const Eigen::ArrayXf> x(inp + i0, n);
    Eigen::Map<Eigen::ArrayXf> y(out + i0, n);
    y = 0.5f * x * (1.0f + (kGeluScale * (x + 0.044715f * x.cube())).tanh());
  }
}

void GeluBackwardFast(float* dinp, const float* inp, const float* dout, long N) {
  alignas(64) float tanh_buf[kGeluChunk];
  for (long i0 = 0; i0 < N; i0 += kGeluChunk) {
    const long n = std::min(kGeluChunk, N - i0);
    Eigen::Map<const Eigen::ArrayXf> x(inp + i0, n);
    Eigen::Map<const Eigen::ArrayXf> dy(dout + i0, n);
    Eigen::Map<Eigen::ArrayXf> dx(dinp + i0, n);
    Eigen::Map<Eigen::ArrayXf> t(tanh_buf, n);
    t = (kGeluScale * (x + 0.044715f * x.cube())).tanh();
    dx += dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t.square()) * kGeluScale *
                                        (1.0f + 3.0f * 0.044715f * x.square()));
  }
}

void GeluGradInPlace(float* grad, const float* inp, long N) {
  alignas(64) float tanh_buf[kGeluChunk];
  for (long i0 = 0; i0 < N; i0 += kGeluChunk) {
    const long n = std::min(kGeluChunk, N - i0);
    Eigen::Map<const Eigen::ArrayXf> x(inp + i0, n);
    Eigen::Map<Eigen::ArrayXf> g(grad + i0, n);
    Eigen::Map<Eigen::ArrayXf> t(tanh_buf, n);
    t = (kGeluScale * (x + 0.044715f * x.cube())).tanh();
    g *= 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t.square()) * kGeluScale * (1.0f + 3.0f * 0.044715f * x.square());
  }
}

double MeasureGemmGflops(double seconds) {
  constexpr int kM = 4096, kK = 256, kN = 1024;
  RowMatrix x = RowMatrix::Random(kM, kK), w = RowMatrix::Random(kN, kK), y(kM, kN);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double best = 1e30;
  for (int rep = 0;
       rep < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++rep) {
    const auto t0 = Clock::now();
    y.noalias() = x * w.transpose();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    if (rep > 1000) break;
  }
  return 2.0 * kM * kK * kN / best / 1e9;
}

}  // namespace engine
