#include "engine/optim/adamw.h"

#include <cmath>

#include <gtest/gtest.h>

namespace engine {
namespace {

TEST(AdamWTest, FirstStepMatchesHandComputed) {
  // t=1: m = 0.1*g, v = 0.001*g^2; bias correction makes m_hat = g, v_hat = g^2, so the Adam
  // direction is g/|g| = 1 (up to eps) and p = 1 - lr * (1 + wd * 1) = 1 - 0.1 * 1.01 = 0.899.
  AdamWConfig c;
  c.weight_decay = 0.01f;
  AdamW opt(1, c);
  float p = 1.0f, g = 0.5f;
  opt.Step(&p, &g, 0.1f);
  EXPECT_NEAR(p, 0.899f, 1e-6);
  EXPECT_NEAR(opt.m()[0], 0.05f, 1e-7);
  EXPECT_NEAR(opt.v()[0], 0.00025f, 2e-8);
  EXPECT_EQ(opt.t(), 1);
}

TEST(AdamWTest, SecondStepMatchesHandComputed) {
  AdamWConfig c;
  c.weight_decay = 0.01f;
  AdamW opt(1, c);
  float p = 1.0f, g1 = 0.5f, g2 = -0.25f;
  opt.Step(&p, &g1, 0.1f);
  opt.Step(&p, &g2, 0.1f);
  // By hand: m = 0.9*0.05 + 0.1*(-0.25) = 0.02; v = 0.999*0.00025 + 0.001*0.0625 = 0.00031225;
  // m_hat = 0.02 / 0.19 = 0.1052632; v_hat = 0.00031225 / 0.001999 = 0.1562031;
  // step = 0.1052632 / 0.3952254 = 0.2663372; p = 0.899 - 0.1 * (0.2663372 + 0.01 * 0.899).
  EXPECT_NEAR(opt.m()[0], 0.02f, 1e-7);
  EXPECT_NEAR(opt.v()[0], 0.00031225f, 2e-8);
  EXPECT_NEAR(p, 0.899 - 0.1 * (0.2663372 + 0.00899), 2e-6);
}

TEST(AdamWTest, WeightDecayShrinksWithZeroGradient) {
  AdamWConfig c;
  c.weight_decay = 0.1f;
  AdamW opt(2, c);
  float p[2] = {2.0f, -2.0f}, g[2] = {0.0f, 0.0f};
  opt.Step(p, g, 0.5f);
  EXPECT_FLOAT_EQ(p[0], 2.0f - 0.5f * 0.1f * 2.0f);
  EXPECT_FLOAT_EQ(p[1], -2.0f + 0.5f * 0.1f * 2.0f);
}

TEST(LearningRateTest, WarmupThenCosine) {
  const double lr = 1e-3;
  EXPECT_DOUBLE_EQ(LearningRate(0, lr, 10, 110), lr * 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(4, lr, 10, 110), lr * 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(9, lr, 10, 110), lr);
  EXPECT_DOUBLE_EQ(LearningRate(10, lr, 10, 110), lr);  // start of the cosine
  // Halfway through the decay the cosine factor is 0.5: min + 0.5 (max - min).
  EXPECT_NEAR(LearningRate(59, lr, 10, 110),
              kMinLrRatio * lr + 0.5 * (1 + std::cos(M_PI * 49.0 / 99.0)) * (1 - kMinLrRatio) * lr,
              1e-12);
  EXPECT_NEAR(LearningRate(109, lr, 10, 110), kMinLrRatio * lr, 1e-12);  // last step
  for (int s = 10; s < 109; ++s) {
    EXPECT_GT(LearningRate(s, lr, 10, 110), LearningRate(s + 1, lr, 10, 110));
  }
  EXPECT_DOUBLE_EQ(LearningRate(0, lr, 0, 1), lr);  // no warmup, one step
}

}  // namespace
}  // namespace engine
