#include "engine/rl/gaussian.h"

#include <cmath>

#include <gtest/gtest.h>

namespace engine::rl {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(GaussianTest, LogProbMatchesTheDensity) {
  // Product of 1-D densities exp(−(a−μ)²/2σ²) / (σ √(2π)), computed directly.
  const float mean[3] = {0.3f, -1.0f, 2.0f};
  const float log_std[3] = {0.0f, -0.7f, 0.4f};
  const float action[3] = {-0.2f, -0.9f, 3.1f};
  double density = 1.0;
  for (int j = 0; j < 3; ++j) {
    const double s = std::exp(static_cast<double>(log_std[j]));
    const double d = action[j] - mean[j];
    density *= std::exp(-d * d / (2 * s * s)) / (s * std::sqrt(2 * kPi));
  }
  EXPECT_NEAR(GaussianLogProb(mean, log_std, action, 3), std::log(density), 1e-6);
  // The standard normal at its mean: −½ log 2π.
  const float zero = 0.0f;
  EXPECT_NEAR(GaussianLogProb(&zero, &zero, &zero, 1), -0.5 * std::log(2 * kPi), 1e-12);
}

TEST(GaussianTest, EntropyIsHalfLogTwoPiESigmaSquared) {
  const float log_std[2] = {-0.5f, 1.25f};
  double want = 0.0;
  for (float l : log_std) {
    const double s = std::exp(static_cast<double>(l));
    want += 0.5 * std::log(2 * kPi * std::exp(1.0) * s * s);
  }
  EXPECT_NEAR(GaussianEntropy(log_std, 2), want, 1e-6);
}

TEST(GaussianTest, LogProbGradientMatchesFiniteDifferences) {
  float mean[2] = {0.1f, -0.4f};
  float log_std[2] = {-0.3f, 0.2f};
  const float action[2] = {0.9f, -1.3f};
  float d_mean[2] = {0, 0}, d_log_std[2] = {0, 0};
  GaussianLogProbGrad(mean, log_std, action, 2, 1.0, d_mean, d_log_std);
  const float h = 1e-3f;
  for (int j = 0; j < 2; ++j) {
    for (float* p : {mean + j, log_std + j}) {
      const float keep = *p;
      *p = keep + h;
      const double up = GaussianLogProb(mean, log_std, action, 2);
      *p = keep - h;
      const double down = GaussianLogProb(mean, log_std, action, 2);
      *p = keep;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(p == mean + j ? d_mean[j] : d_log_std[j], numeric, 1e-3) << j;
    }
  }
}

}  // namespace
}  // namespace engine::rl
