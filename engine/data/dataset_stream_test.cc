// DatasetStream under the loader's plans: per epoch the ranks' parts are disjoint and cover the
// dataset, every epoch is a different shuffle, a step's global batch does not depend on the
// number of ranks, and lengths come from the token table.
#include "engine/data/dataset_stream.h"

#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "engine/data/loader.h"

namespace engine::data {
namespace {

std::shared_ptr<const DatasetStream> Stream(uint64_t n, uint64_t seed) {
  std::vector<int32_t> tokens(n);
  for (uint64_t s = 0; s < n; ++s) tokens[s] = 20 + static_cast<int32_t>(s % 37);
  return std::make_shared<const DatasetStream>(seed, std::move(tokens));
}

PlanConfig Config(std::shared_ptr<const DatasetStream> stream, int rank, int world) {
  PlanConfig c;
  c.seed = stream->seed();
  c.samples_per_step = 24;
  c.rank = rank;
  c.world = world;
  c.tokens_per_row = 128;
  c.dataset = std::move(stream);
  return c;
}

TEST(DatasetStreamTest, EachEpochIsAShuffleOfEverySample) {
  auto s = Stream(103, 9);
  std::vector<uint64_t> e0, e1;
  for (uint64_t g = 0; g < 103; ++g) e0.push_back(s->SampleAt(g));
  for (uint64_t g = 103; g < 206; ++g) e1.push_back(s->SampleAt(g));
  EXPECT_NE(e0, e1);
  std::vector<uint64_t> sorted0 = e0, sorted1 = e1;
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  for (uint64_t i = 0; i < 103; ++i) {
    EXPECT_EQ(sorted0[i], i);
    EXPECT_EQ(sorted1[i], i);
  }
  EXPECT_NE(e0, std::vector<uint64_t>(sorted0));  // shuffled, not in order
  EXPECT_EQ(s->Epoch(250), 2u);
  EXPECT_EQ(s->InEpoch(250), 44u);
  // Another seed, another order; going back to an old epoch gives its order again.
  auto other = Stream(103, 10);
  EXPECT_NE(other->SampleAt(0) * 1000 + other->SampleAt(1), e0[0] * 1000 + e0[1]);
  EXPECT_EQ(s->SampleAt(0), e0[0]);
  EXPECT_EQ(s->SampleAt(102), e0[102]);
}

TEST(DatasetStreamTest, RankPartsAreDisjointAndCoverEveryEpoch) {
  auto s = Stream(103, 5);
  for (int world : {1, 2, 3, 5}) {
    // Global index -> (rank, dataset sample) over the first three epochs.
    std::map<uint64_t, std::pair<int, uint64_t>> seen;
    for (int rank = 0; rank < world; ++rank) {
      PlanConfig c = Config(s, rank, world);
      for (int64_t step = 0; step * 24 < 3 * 103; ++step) {
        auto p = MakePlan(c, step, static_cast<uint64_t>(step) * 24);
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        ASSERT_EQ(p->dataset_samples.size(), static_cast<size_t>(p->num_samples()));
        for (int i = 0; i < p->num_samples(); ++i) {
          EXPECT_EQ(p->lengths[i], s->Tokens(p->dataset_samples[i]));
          auto [it, fresh] =
              seen.emplace(p->SampleId(i), std::make_pair(rank, p->dataset_samples[i]));
          EXPECT_TRUE(fresh) << "global index " << p->SampleId(i) << " on two ranks";
        }
      }
    }
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::set<uint64_t> covered;
      std::map<int, std::set<uint64_t>> by_rank;
      for (uint64_t g = epoch * 103; g < (epoch + 1) * 103; ++g) {
        ASSERT_TRUE(seen.count(g)) << "world " << world << " index " << g;
        covered.insert(seen[g].second);
        by_rank[seen[g].first].insert(seen[g].second);
      }
      EXPECT_EQ(covered.size(), 103u) << "world " << world << " epoch " << epoch;
      size_t total = 0;
      for (const auto& [r, part] : by_rank) total += part.size();
      EXPECT_EQ(total, 103u) << "parts overlap";
      EXPECT_EQ(by_rank.size(), static_cast<size_t>(world));
    }
  }
}

TEST(DatasetStreamTest, AStepsGlobalBatchIsTheSameOnAnyNumberOfRanks) {
  auto s = Stream(50, 2);
  for (int64_t step : {0, 2, 4}) {  // step 2 straddles the first epoch boundary
    std::multiset<uint64_t> one;
    auto p1 = MakePlan(Config(s, 0, 1), step, static_cast<uint64_t>(step) * 24);
    ASSERT_TRUE(p1.ok());
    one.insert(p1->dataset_samples.begin(), p1->dataset_samples.end());
    std::multiset<uint64_t> three;
    for (int r = 0; r < 3; ++r) {
      auto p = MakePlan(Config(s, r, 3), step, static_cast<uint64_t>(step) * 24);
      ASSERT_TRUE(p.ok());
      three.insert(p->dataset_samples.begin(), p->dataset_samples.end());
    }
    EXPECT_EQ(one, three) << "step " << step;
  }
}

TEST(DatasetStreamTest, RowsMustHoldTheLongestSample) {
  auto s = Stream(50, 2);  // longest 56 tokens
  PlanConfig c = Config(s, 0, 1);
  c.tokens_per_row = 55;
  EXPECT_EQ(ValidatePlanConfig(c).field(), "tokens_per_row");
  c.tokens_per_row = 56;
  EXPECT_TRUE(ValidatePlanConfig(c).ok());
}

}  // namespace
}  // namespace engine::data
