// Partitions over ranks: disjoint, covering, balanced, deterministic; shuffles differ per epoch.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "storage/partition.h"

namespace storage {
namespace {

TEST(PartitionTest, DisjointCoveringAndBalancedForSeveralWorldSizes) {
  for (uint64_t count : {0ull, 1ull, 5ull, 10ull, 1001ull}) {
    for (int world : {1, 2, 3, 4, 7, 16}) {
      for (bool shuffle : {false, true}) {
        std::vector<int> seen(count, 0);
        size_t lo = SIZE_MAX, hi = 0;
        for (int rank = 0; rank < world; ++rank) {
          auto part = Partition(
              count, {.seed = 3, .epoch = 2, .world = world, .rank = rank, .shuffle = shuffle});
          ASSERT_TRUE(part.ok());
          lo = std::min(lo, part->size());
          hi = std::max(hi, part->size());
          for (uint64_t i : *part) {
            ASSERT_LT(i, count);
            ++seen[i];
          }
        }
        for (uint64_t i = 0; i < count; ++i) {
          EXPECT_EQ(seen[i], 1) << "item " << i << " count " << count << " world " << world;
        }
        EXPECT_LE(hi - lo, 1u);
      }
    }
  }
}

TEST(PartitionTest, SameSeedAndEpochGiveTheSameParts) {
  for (int rank = 0; rank < 3; ++rank) {
    PartitionSpec spec{.seed = 11, .epoch = 5, .world = 3, .rank = rank};
    EXPECT_EQ(*Partition(500, spec), *Partition(500, spec));
  }
}

TEST(PartitionTest, EpochsAndSeedsShuffleDifferently) {
  std::vector<uint64_t> e0 = EpochOrder(1000, 1, 0, true);
  std::vector<uint64_t> e1 = EpochOrder(1000, 1, 1, true);
  std::vector<uint64_t> s2 = EpochOrder(1000, 2, 0, true);
  std::vector<uint64_t> sorted(1000);
  for (uint64_t i = 0; i < 1000; ++i) sorted[i] = i;
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, s2);
  EXPECT_NE(e0, sorted);
  // Each is a permutation.
  std::vector<uint64_t> p = e1;
  std::sort(p.begin(), p.end());
  EXPECT_EQ(p, sorted);
  // A shuffle, not a rotation: few items stay in place (about 1 expected).
  int fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) fixed += e0[i] == i;
  EXPECT_LT(fixed, 10);
  // Pinned values: the order is part of the data position a checkpoint records, so it must not
  // change between builds or platforms.
  EXPECT_EQ(EpochOrder(8, 0, 0, true), (std::vector<uint64_t>{4, 5, 2, 1, 3, 0, 7, 6}));
  EXPECT_EQ(EpochOrder(8, 42, 3, true), (std::vector<uint64_t>{7, 4, 6, 1, 0, 5, 3, 2}));
}

TEST(PartitionTest, UnshuffledPartsAreContiguousRanges) {
  auto p = Partition(10, {.world = 3, .rank = 1, .shuffle = false});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (std::vector<uint64_t>{3, 4, 5}));
}

TEST(PartitionTest, RankOutsideTheWorldIsRefused) {
  EXPECT_FALSE(Partition(10, {.world = 2, .rank = 2}).ok());
  EXPECT_FALSE(Partition(10, {.world = 0, .rank = 0}).ok());
  EXPECT_FALSE(Partition(10, {.world = 2, .rank = -1}).ok());
}

}  // namespace
}  // namespace storage
