// The built-in embodied sample-length distribution: what one training sample of an embodied
// policy looks like in tokens, drawn deterministically from a seed.
//
// A sample is a language instruction followed by one or more observation frames; each frame is
// `cameras` images of 16 patch tokens plus one proprioceptive state token. Most samples hold one
// frame; a fraction are long-history samples of several frames. With the defaults the length
// ranges over [22, 285] tokens with a mean of about 72. This file only describes and draws
// compositions; building token ids or embeddings from them is the model's job.
#pragma once

#include <cstdint>
#include <vector>

namespace engine::data {

// Knobs of the distribution. The defaults are the built-in distribution; every range is
// inclusive and drawn uniformly.
struct EmbodiedLengthConfig {
  int min_language_tokens = 5;
  int max_language_tokens = 40;
  int min_cameras = 1;
  int max_cameras = 3;
  int patch_tokens_per_camera = 16;
  int state_tokens_per_frame = 1;
  double long_history_fraction = 0.2;
  int min_history_frames = 2;
  int max_history_frames = 5;

  // Longest sample this configuration can produce (285 for the defaults).
  int MaxTokens() const;
  // Shortest sample (22 for the defaults).
  int MinTokens() const;
  // Expected tokens of a sample (72 for the defaults).
  double MeanTokens() const;
};

// The token layout of one sample: language first, then `frames` frames, each holding `cameras`
// images of `patch_tokens_per_camera` patches followed by `state_tokens_per_frame` state tokens.
struct SampleComposition {
  int language_tokens = 0;
  int cameras = 0;
  int frames = 0;
  int patch_tokens_per_camera = 16;
  int state_tokens_per_frame = 1;

  int TokensPerFrame() const { return cameras * patch_tokens_per_camera + state_tokens_per_frame; }
  int NumTokens() const { return language_tokens + frames * TokensPerFrame(); }
};

// Draws SampleCompositions. The same seed and config give the same sequence on every platform:
// the generator is SplitMix64 with explicit integer arithmetic, not <random>'s distributions,
// whose output the standard leaves to the library.
class EmbodiedLengthSampler {
 public:
  explicit EmbodiedLengthSampler(uint64_t seed, EmbodiedLengthConfig config = {});

  SampleComposition Next();
  std::vector<SampleComposition> Draw(int n);
  const EmbodiedLengthConfig& config() const { return config_; }

 private:
  uint64_t NextBits();
  int UniformInt(int lo, int hi);  // inclusive
  double Uniform01();

  uint64_t state_;
  EmbodiedLengthConfig config_;
};

// Token count of each composition, in order.
std::vector<int32_t> SampleLengths(const std::vector<SampleComposition>& samples);

}  // namespace engine::data
