#include "storage/partition.h"

#include <numeric>
#include <utility>

namespace storage {

namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias: draws landing in the short last stripe of the
// 64-bit range are rejected.
uint64_t Below(uint64_t* state, uint64_t bound) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    uint64_t x = SplitMix64(state);
    if (x < limit) return x % bound;
  }
}

}  // namespace

std::vector<uint64_t> EpochOrder(uint64_t count, uint64_t seed, uint64_t epoch, bool shuffle) {
  std::vector<uint64_t> order(count);
  std::iota(order.begin(), order.end(), uint64_t{0});
  if (!shuffle || count < 2) return order;
  // One stream per (seed, epoch): mixing the epoch through SplitMix64 keeps neighbouring
  // epochs' streams unrelated.
  uint64_t mix = seed;
  uint64_t state = SplitMix64(&mix) ^ (epoch * 0xD1B54A32D192ED03ull);
  SplitMix64(&state);
  for (uint64_t i = count - 1; i > 0; --i) std::swap(order[i], order[Below(&state, i + 1)]);
  return order;
}

common::Result<std::vector<uint64_t>> Partition(uint64_t count, const PartitionSpec& spec) {
  if (spec.world < 1 || spec.rank < 0 || spec.rank >= spec.world) {
    return common::InvalidArgument("rank " + std::to_string(spec.rank) + " is not in world of " +
                                   std::to_string(spec.world));
  }
  std::vector<uint64_t> order = EpochOrder(count, spec.seed, spec.epoch, spec.shuffle);
  // ⌊r·N/W⌋ without overflow for any N < 2^64 and W < 2^31.
  auto bound = [&](uint64_t r) {
    unsigned __int128 x = static_cast<unsigned __int128>(r) * count / spec.world;
    return static_cast<uint64_t>(x);
  };
  uint64_t begin = bound(spec.rank), end = bound(spec.rank + 1);
  return std::vector<uint64_t>(order.begin() + begin, order.begin() + end);
}

}  // namespace storage
