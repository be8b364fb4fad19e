#include "engine/data/embodied_lengths.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace engine::data {
namespace {

TEST(EmbodiedLengthSamplerTest, SameSeedSameSamples) {
  EmbodiedLengthSampler a(7), b(7), c(8);
  const auto la = SampleLengths(a.Draw(1000));
  EXPECT_EQ(la, SampleLengths(b.Draw(1000)));
  EXPECT_NE(la, SampleLengths(c.Draw(1000)));
}

TEST(EmbodiedLengthSamplerTest, CompositionAndLengthRange) {
  EmbodiedLengthSampler sampler(1);
  const EmbodiedLengthConfig& cfg = sampler.config();
  EXPECT_EQ(cfg.MinTokens(), 22);
  EXPECT_EQ(cfg.MaxTokens(), 285);
  const auto samples = sampler.Draw(50000);
  int long_history = 0;
  double sum = 0;
  int lo = 1 << 30, hi = 0;
  for (const SampleComposition& s : samples) {
    ASSERT_GE(s.language_tokens, 5);
    ASSERT_LE(s.language_tokens, 40);
    ASSERT_GE(s.cameras, 1);
    ASSERT_LE(s.cameras, 3);
    ASSERT_GE(s.frames, 1);
    ASSERT_LE(s.frames, 5);
    EXPECT_EQ(s.NumTokens(), s.language_tokens + s.frames * (16 * s.cameras + 1));
    long_history += s.frames > 1;
    sum += s.NumTokens();
    lo = std::min(lo, s.NumTokens());
    hi = std::max(hi, s.NumTokens());
  }
  // Expected mean: 22.5 + 33 · (0.8 · 1 + 0.2 · 3.5) = 72.0.
  EXPECT_NEAR(sum / samples.size(), 72.0, 1.0);
  EXPECT_DOUBLE_EQ(cfg.MeanTokens(), 72.0);
  EXPECT_NEAR(long_history / 50000.0, 0.2, 0.01);
  EXPECT_EQ(lo, 22);   // reached with 50k draws (p ≈ 1/108 per draw)
  EXPECT_GT(hi, 250);  // 285 itself is rare (p ≈ 1/2160)
  EXPECT_LE(hi, 285);
}

}  // namespace
}  // namespace engine::data
