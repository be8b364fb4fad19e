// The latency model's statistics (mean, jitter, tail share and shape), its keying, its bounds, and
// that Wait spends the time it is given.
#include "engine/sim/step_latency.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace engine::sim {
namespace {

std::vector<double> Draw(const StepLatency& l, int n) {
  std::vector<double> x;
  x.reserve(n);
  for (int i = 0; i < n; ++i) x.push_back(l.Sample(i % 64, i / 64));
  return x;
}

TEST(StepLatencyTest, BodyHasTheRequestedMeanAndJitter) {
  auto l = StepLatency::Create({.mean_s = 0.01, .jitter = 0.3, .seed = 1}).value();
  const std::vector<double> x = Draw(l, 200000);
  double sum = 0, sq = 0;
  for (double v : x) sum += v, sq += v * v;
  const double mean = sum / x.size();
  const double sd = std::sqrt(sq / x.size() - mean * mean);
  EXPECT_NEAR(mean, 0.01, 0.0002);    // 2%
  EXPECT_NEAR(sd / mean, 0.3, 0.01);  // coefficient of variation
  EXPECT_GT(*std::min_element(x.begin(), x.end()), 0.0);
}

TEST(StepLatencyTest, TailHasTheRequestedShareAndParetoShape) {
  StepLatencyOptions o{.mean_s = 0.01,
                       .jitter = 0.1,
                       .tail_probability = 0.05,
                       .tail_alpha = 2.0,
                       .tail_scale = 5.0,
                       .max_s = 100.0,
                       .seed = 2};
  auto l = StepLatency::Create(o).value();
  const std::vector<double> x = Draw(l, 400000);
  const double xmin = o.tail_scale * o.mean_s;
  // The body (lognormal, cv 0.1) essentially never reaches 5× its mean: beyond xmin is the tail.
  size_t tail = 0, twice = 0, four = 0;
  double sum = 0;
  for (double v : x) {
    sum += v;
    tail += v >= xmin;
    twice += v >= 2 * xmin;
    four += v >= 4 * xmin;
  }
  EXPECT_NEAR(static_cast<double>(tail) / x.size(), 0.05, 0.002);
  // Pareto(α = 2): P(X ≥ 2 x_min | tail) = 1/4, P(X ≥ 4 x_min | tail) = 1/16.
  EXPECT_NEAR(static_cast<double>(twice) / tail, 0.25, 0.01);
  EXPECT_NEAR(static_cast<double>(four) / tail, 0.0625, 0.006);
  // Mean of the mixture: 0.95·0.01 + 0.05·(2·0.05/1) = 0.0145 (the tail's variance is infinite
  // at α = 2, so the tolerance is loose).
  EXPECT_NEAR(l.ExpectedSeconds(), 0.0145, 1e-12);
  EXPECT_NEAR(sum / x.size(), 0.0145, 0.0008);
}

TEST(StepLatencyTest, DrawsAreKeyedBySeedEnvAndStepAndCapped) {
  auto a = StepLatency::Create({.mean_s = 0.01, .jitter = 0.5, .seed = 3}).value();
  auto b = StepLatency::Create({.mean_s = 0.01, .jitter = 0.5, .seed = 3}).value();
  auto c = StepLatency::Create({.mean_s = 0.01, .jitter = 0.5, .seed = 4}).value();
  EXPECT_EQ(a.Sample(5, 9), b.Sample(5, 9));  // order of calls does not matter
  EXPECT_NE(a.Sample(5, 9), c.Sample(5, 9));
  EXPECT_NE(a.Sample(5, 9), a.Sample(6, 9));
  EXPECT_NE(a.Sample(5, 9), a.Sample(5, 10));
  auto capped =
      StepLatency::Create(
          {.mean_s = 0.01, .tail_probability = 0.5, .tail_alpha = 1.1, .max_s = 0.02, .seed = 5})
          .value();
  for (int i = 0; i < 1000; ++i) EXPECT_LE(capped.Sample(0, i), 0.02);
  auto none = StepLatency::Create({}).value();
  EXPECT_EQ(none.Sample(1, 2), 0.0);
  auto fixed = StepLatency::Create({.mean_s = 0.003}).value();
  EXPECT_EQ(fixed.Sample(1, 2), 0.003);  // no jitter, no tail: exactly the mean
}

TEST(StepLatencyTest, RefusesOutOfRangeOptions) {
  EXPECT_FALSE(StepLatency::Create({.mean_s = -1}).ok());
  EXPECT_FALSE(StepLatency::Create({.mean_s = NAN}).ok());
  EXPECT_FALSE(StepLatency::Create({.jitter = -0.1}).ok());
  EXPECT_FALSE(StepLatency::Create({.tail_probability = 1.0}).ok());
  EXPECT_FALSE(StepLatency::Create({.tail_alpha = 1.0}).ok());
  EXPECT_FALSE(StepLatency::Create({.tail_scale = 0.5}).ok());
  EXPECT_FALSE(StepLatency::Create({.max_s = 0.0}).ok());
}

TEST(StepLatencyTest, WaitSpendsAtLeastTheTimeInBothModes) {
  using Clock = std::chrono::steady_clock;
  for (auto mode : {StepLatency::WaitMode::kSleep, StepLatency::WaitMode::kBusy}) {
    const auto start = Clock::now();
    StepLatency::Wait(0.005, mode);
    const double spent = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(spent, 0.005);
    EXPECT_LT(spent, 0.5);
  }
}

}  // namespace
}  // namespace engine::sim
