// The diagonal Gaussian of the RL policy head: exact log-density, entropy and their derivatives.
// Per action dimension j: a_j ~ N(μ_j, σ_j²) with σ_j = exp(log_std_j) (state-independent).
//   log p(a) = Σ_j −½ z_j² − log_std_j − ½ log 2π,     z_j = (a_j − μ_j) / σ_j
//   H        = Σ_j log_std_j + ½ (1 + log 2π)
//   ∂ log p / ∂μ_j = z_j / σ_j     ∂ log p / ∂log_std_j = z_j² − 1     ∂H / ∂log_std_j = 1
#pragma once

#include <cmath>

namespace engine::rl {

inline constexpr double kHalfLog2Pi = 0.91893853320467274178;  // ½ log 2π

inline double GaussianLogProb(const float* mean, const float* log_std, const float* action,
                              int dim) {
  double lp = 0.0;
  for (int j = 0; j < dim; ++j) {
    const double z = (static_cast<double>(action[j]) - mean[j]) * std::exp(-log_std[j]);
    lp += -0.5 * z * z - log_std[j] - kHalfLog2Pi;
  }
  return lp;
}

inline double GaussianEntropy(const float* log_std, int dim) {
  double h = 0.0;
  for (int j = 0; j < dim; ++j) h += log_std[j] + 0.5 + kHalfLog2Pi;
  return h;
}

// Adds scale · ∂ log p(action) / ∂(mean, log_std) into d_mean (dim) and d_log_std (dim).
inline void GaussianLogProbGrad(const float* mean, const float* log_std, const float* action,
                                int dim, double scale, float* d_mean, float* d_log_std) {
  for (int j = 0; j < dim; ++j) {
    const double inv_std = std::exp(-log_std[j]);
    const double z = (static_cast<double>(action[j]) - mean[j]) * inv_std;
    d_mean[j] += static_cast<float>(scale * z * inv_std);
    d_log_std[j] += static_cast<float>(scale * (z * z - 1.0));
  }
}

}  // namespace engine::rl
