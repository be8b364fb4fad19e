// Statistics: per-element moments against a direct computation, u8 channels, token histogram,
// and the JSON round trip.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "storage/stats.h"
#include "storage/testing/episodes.h"
#include "storage/token_mapping.h"

namespace storage {
namespace {

TEST(StatsTest, MomentsPerElementOfTheLastDimensionMatchADirectComputation) {
  StatsAccumulator acc;
  std::vector<Episode> eps;
  for (int i = 0; i < 5; ++i) {
    eps.push_back(testing::MakeEpisode(i, 7 + 3 * i));
    acc.Add(eps.back(), std::vector<uint32_t>(eps.back().frames(), 10 + i % 2));
  }
  DatasetStats s = acc.Finish();
  EXPECT_EQ(s.episodes, 5u);
  EXPECT_EQ(s.frames, 7u * 5 + 30);
  EXPECT_EQ(s.token_histogram.size(), 2u);
  EXPECT_EQ(s.token_histogram[10], 7u + 13 + 19);
  EXPECT_EQ(s.token_histogram[11], 10u + 16);
  ASSERT_EQ(s.keys.size(), 4u);
  // Key 2 is obs/state f64 (T,4); key 1 obs/image u8 (T,8,8,3): per channel.
  for (size_t key : {size_t{0}, size_t{1}, size_t{2}, size_t{3}}) {
    const KeySpec& spec = eps[0].arrays[key].spec;
    int64_t groups = spec.frame_shape.empty() ? 1 : spec.frame_shape.back();
    ASSERT_EQ(s.keys[key].mean.size(), static_cast<size_t>(groups)) << spec.name;
    for (int64_t g = 0; g < groups; ++g) {
      double sum = 0, sq = 0, mn = 1e300, mx = -1e300, n = 0;
      for (const Episode& e : eps) {
        const Array& a = e.arrays[key];
        for (int64_t i = g; i < a.frames * spec.FrameElements(); i += groups) {
          double x = spec.dtype == DType::kU8 ? a.data[i]
                     : spec.dtype == DType::kF32
                         ? reinterpret_cast<const float*>(a.data.data())[i]
                         : reinterpret_cast<const double*>(a.data.data())[i];
          sum += x, sq += x * x, n += 1, mn = std::min(mn, x), mx = std::max(mx, x);
        }
      }
      double mean = sum / n;
      EXPECT_NEAR(s.keys[key].mean[g], mean, 1e-9) << spec.name << " " << g;
      EXPECT_NEAR(s.keys[key].std[g], std::sqrt(sq / n - mean * mean), 1e-6) << spec.name;
      EXPECT_EQ(s.keys[key].min[g], mn);
      EXPECT_EQ(s.keys[key].max[g], mx);
    }
  }
  auto back = DatasetStats::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ToJson(), s.ToJson());
}

TEST(StatsTest, ByteCountsMatchTheLoopByIndex) {
  std::mt19937 rng(7);
  for (int64_t groups : {1, 2, 3, 4, 5, 7}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, groups * 4 + 1, int64_t{10007}}) {
      std::vector<uint8_t> data(static_cast<size_t>(count));
      // Runs of equal bytes as flat image regions make them, and noise.
      for (int64_t i = 0; i < count; ++i) {
        data[i] = (i / 64) % 2 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(i / 640);
      }
      std::vector<std::array<uint64_t, 256>> want(groups), got(groups);
      for (auto& t : want) t.fill(0);
      for (auto& t : got) t.fill(3);  // counts add to what is there
      for (int64_t i = 0; i < count; ++i) ++want[i % groups][data[i]];
      for (auto& t : want) {
        for (auto& v : t) v += 3;
      }
      CountBytesByGroup(data.data(), count, groups, got.data());
      EXPECT_EQ(got, want) << "groups " << groups << " count " << count;
    }
  }
}

TEST(TokenMappingTest, CountsImagesProprioLanguageActionsAndHistory) {
  Schema schema = testing::MakeEpisode(0, 1).schema();  // one 8x8 image, one low-dim obs key
  TokenMapping m;
  m.patch_size = 3;  // ceil(8/3)^2 = 9 patches
  m.action_horizon = 16;
  m.history_frames = 2;
  auto t = SampleTokenCounts(schema, 4, "open the  drawer\n", m);
  // 3 words + 16 actions + frames·(9 + 1)
  EXPECT_EQ(t, (std::vector<uint32_t>{29, 39, 39, 39}));
  m.max_language_tokens = 1;
  EXPECT_EQ(LanguageTokens("open the drawer", m), 1);
  m.patch_size = 0;
  EXPECT_FALSE(m.Validate().ok());
}

}  // namespace
}  // namespace storage
