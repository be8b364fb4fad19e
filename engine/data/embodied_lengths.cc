#include "engine/data/embodied_lengths.h"

#include "common/hash.h"

namespace engine::data {

int EmbodiedLengthConfig::MaxTokens() const {
  const int frames = max_history_frames > 1 ? max_history_frames : 1;
  return max_language_tokens +
         frames * (max_cameras * patch_tokens_per_camera + state_tokens_per_frame);
}

int EmbodiedLengthConfig::MinTokens() const {
  return min_language_tokens + min_cameras * patch_tokens_per_camera + state_tokens_per_frame;
}

double EmbodiedLengthConfig::MeanTokens() const {
  // Language, cameras and frames are drawn independently, so E[frames·per_frame] factorises.
  const double language = 0.5 * (min_language_tokens + max_language_tokens);
  const double cameras = 0.5 * (min_cameras + max_cameras);
  const double frames = (1.0 - long_history_fraction) +
                        long_history_fraction * 0.5 * (min_history_frames + max_history_frames);
  return language + frames * (cameras * patch_tokens_per_camera + state_tokens_per_frame);
}

EmbodiedLengthSampler::EmbodiedLengthSampler(uint64_t seed, EmbodiedLengthConfig config)
    : state_(seed), config_(config) {}

uint64_t EmbodiedLengthSampler::NextBits() { return common::SplitMix64Next(state_); }

int EmbodiedLengthSampler::UniformInt(int lo, int hi) {
  // Multiply-shift on the top 32 bits: bias below 2^-32 per draw for these tiny ranges.
  const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int>(((NextBits() >> 32) * range) >> 32);
}

double EmbodiedLengthSampler::Uniform01() {
  return static_cast<double>(NextBits() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

SampleComposition EmbodiedLengthSampler::Next() {
  SampleComposition s;
  s.patch_tokens_per_camera = config_.patch_tokens_per_camera;
  s.state_tokens_per_frame = config_.state_tokens_per_frame;
  s.language_tokens = UniformInt(config_.min_language_tokens, config_.max_language_tokens);
  s.cameras = UniformInt(config_.min_cameras, config_.max_cameras);
  const bool long_history = Uniform01() < config_.long_history_fraction;
  s.frames = long_history ? UniformInt(config_.min_history_frames, config_.max_history_frames) : 1;
  return s;
}

std::vector<SampleComposition> EmbodiedLengthSampler::Draw(int n) {
  std::vector<SampleComposition> out;
  out.reserve(n > 0 ? n : 0);
  for (int i = 0; i < n; ++i) out.push_back(Next());
  return out;
}

std::vector<int32_t> SampleLengths(const std::vector<SampleComposition>& samples) {
  std::vector<int32_t> lengths;
  lengths.reserve(samples.size());
  for (const SampleComposition& s : samples) lengths.push_back(s.NumTokens());
  return lengths;
}

}  // namespace engine::data
