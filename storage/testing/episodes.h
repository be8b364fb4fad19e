// Test helper: small synthetic episodes of a fixed schema (an image key, a low-dim key,
// actions, rewards), with content that differs per (seed, episode, key, element).
#pragma once

#include <cstdint>
#include <string>

#include "storage/episode.h"

namespace storage::testing {

// Keys: actions f32 (T,7), obs/image u8 (T,8,8,3), obs/state f64 (T,4), rewards f32 (T).
Episode MakeEpisode(uint64_t seed, int64_t frames, const std::string& demo_name = "");
// Flips one bit of `path` at byte `offset`.
void FlipByte(const std::string& path, uint64_t offset);
// Every byte of a file.
std::string ReadAll(const std::string& path);

}  // namespace storage::testing
