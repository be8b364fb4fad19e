// Which items (samples or episodes) each rank reads in an epoch. Every rank computes the same
// epoch permutation from (seed, epoch) alone, with no communication, and takes a contiguous
// slice of it: rank r of W gets positions [⌊r·N/W⌋, ⌊(r+1)·N/W⌋). The parts are therefore
// disjoint, cover all N items, differ in size by at most one, and are the same on every run.
// The permutation is a Fisher-Yates shuffle driven by SplitMix64 with explicit integer
// arithmetic (not <random>'s distributions, whose output the standard leaves to the library),
// so it is the same on every platform.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace storage {

struct PartitionSpec {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  int world = 1;
  int rank = 0;
  bool shuffle = true;  // false: items in order (epoch and seed unused)
};

// The order of all `count` items in an epoch.
std::vector<uint64_t> EpochOrder(uint64_t count, uint64_t seed, uint64_t epoch, bool shuffle);

// This rank's items for the epoch, in the order it should read them.
common::Result<std::vector<uint64_t>> Partition(uint64_t count, const PartitionSpec& spec);

}  // namespace storage
