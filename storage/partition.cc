#include "storage/partition.h"

#include <numeric>
#include <utility>

#include "common/rng.h"

namespace storage {

std::vector<uint64_t> EpochOrder(uint64_t count, uint64_t seed, uint64_t epoch, bool shuffle) {
  std::vector<uint64_t> order(count);
  std::iota(order.begin(), order.end(), uint64_t{0});
  if (!shuffle || count < 2) return order;
  // One stream per (seed, epoch): mixing the epoch through SplitMix64 keeps neighbouring
  // epochs' streams unrelated.
  common::Rng rng(common::Rng(seed).NextU64() ^ (epoch * 0xD1B54A32D192ED03ull));
  rng.NextU64();
  for (uint64_t i = count - 1; i > 0; --i) std::swap(order[i], order[rng.Below(i + 1)]);
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
