// The alpha-beta all-reduce terms against their closed forms.
#include "planner/allreduce.h"

#include <gtest/gtest.h>

namespace planner {
namespace {

const Link kLink{/*latency_s=*/5e-6, /*bytes_per_s=*/1e10};
const Link kFast{/*latency_s=*/1e-6, /*bytes_per_s=*/2e11};

TEST(Allreduce, RingClosedForm) {
  const double n = 64e6;
  for (int p : {2, 3, 8, 100, 1024}) {
    const double expected = 2.0 * (p - 1) / p * n / 1e10 + 2.0 * (p - 1) * 5e-6;
    EXPECT_DOUBLE_EQ(RingAllreduceSeconds(n, p, kLink), expected) << p;
  }
  EXPECT_EQ(RingAllreduceSeconds(n, 1, kLink), 0.0);
}

TEST(Allreduce, RingBandwidthTermApproachesTwiceTheBuffer) {
  // Large p: 2·n·β plus latency; the bandwidth term never exceeds 2·n·β.
  const Link no_latency{0.0, 1e10};
  EXPECT_LT(RingAllreduceSeconds(1e9, 4096, no_latency), 2.0 * 1e9 / 1e10);
  EXPECT_NEAR(RingAllreduceSeconds(1e9, 4096, no_latency), 0.2, 1e-4);
}

TEST(Allreduce, RecursiveDoublingClosedForm) {
  const double n = 1e6;
  EXPECT_DOUBLE_EQ(RecursiveDoublingSeconds(n, 8, kLink), 3 * (5e-6 + n / 1e10));
  EXPECT_DOUBLE_EQ(RecursiveDoublingSeconds(n, 1024, kLink), 10 * (5e-6 + n / 1e10));
  // 12 ranks: 8 in the doubling (3 rounds) plus fold-in and hand-back.
  EXPECT_DOUBLE_EQ(RecursiveDoublingSeconds(n, 12, kLink), 5 * (5e-6 + n / 1e10));
  EXPECT_EQ(RecursiveDoublingSeconds(n, 1, kLink), 0.0);
}

TEST(Allreduce, RecursiveDoublingWinsSmallRingWinsLarge) {
  EXPECT_LT(RecursiveDoublingSeconds(1024, 256, kLink), RingAllreduceSeconds(1024, 256, kLink));
  EXPECT_GT(RecursiveDoublingSeconds(1e9, 256, kLink), RingAllreduceSeconds(1e9, 256, kLink));
}

TEST(Allreduce, HierarchicalClosedForm) {
  const double n = 1e9;
  const int nodes = 32, g = 8;
  const double intra = 2.0 * (7.0 / 8.0 * n / 2e11 + 7 * 1e-6);
  const double inter = 2.0 * 31.0 / 32.0 * (n / 8) / 1e10 + 2.0 * 31 * 5e-6;
  EXPECT_DOUBLE_EQ(HierarchicalSeconds(n, nodes, g, kFast, kLink), intra + inter);
  // One node: only the intra-node halves; one rank per node: a plain ring over nodes.
  EXPECT_DOUBLE_EQ(HierarchicalSeconds(n, 1, g, kFast, kLink), intra);
  EXPECT_DOUBLE_EQ(HierarchicalSeconds(n, nodes, 1, kFast, kLink),
                   RingAllreduceSeconds(n, nodes, kLink));
}

TEST(Allreduce, HierarchicalBeatsFlatRingOverSlowNetwork) {
  // The flat ring's bottleneck is the inter-node link with 2(p−1) latency terms.
  EXPECT_LT(AllreduceSeconds(AllreduceAlgorithm::kHierarchical, 1e8, 1024, 8, kFast, kLink),
            AllreduceSeconds(AllreduceAlgorithm::kRing, 1e8, 1024, 8, kFast, kLink));
}

TEST(Allreduce, OneNodeUsesIntraLink) {
  EXPECT_DOUBLE_EQ(AllreduceSeconds(AllreduceAlgorithm::kRing, 1e6, 8, 8, kFast, kLink),
                   RingAllreduceSeconds(1e6, 8, kFast));
  EXPECT_DOUBLE_EQ(AllreduceSeconds(AllreduceAlgorithm::kRing, 1e6, 16, 8, kFast, kLink),
                   RingAllreduceSeconds(1e6, 16, kLink));
}

TEST(Allreduce, MonotonicInBytesAndRanks) {
  for (auto a : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                 AllreduceAlgorithm::kHierarchical}) {
    double prev = 0.0;
    for (int p = 8; p <= 4096; p *= 2) {
      const double t = AllreduceSeconds(a, 1e8, p, 8, kFast, kLink);
      EXPECT_GE(t, prev) << AllreduceAlgorithmName(a) << " p=" << p;
      prev = t;
    }
    EXPECT_LT(AllreduceSeconds(a, 1e6, 64, 8, kFast, kLink),
              AllreduceSeconds(a, 1e7, 64, 8, kFast, kLink));
  }
}

TEST(Allreduce, ParseNames) {
  for (auto a : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                 AllreduceAlgorithm::kHierarchical}) {
    auto r = ParseAllreduceAlgorithm(AllreduceAlgorithmName(a));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, a);
  }
  EXPECT_FALSE(ParseAllreduceAlgorithm("tree").ok());
}

}  // namespace
}  // namespace planner
