#include "engine/data/padded_batching.h"

#include <gtest/gtest.h>

namespace engine::data {
namespace {

TEST(PadBatchesTest, PadsToBatchLongestOrFixedLength) {
  const std::vector<int32_t> lengths = {10, 30, 20, 5, 5};
  auto own = PadBatches(lengths, 2, 0);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->pad_length, (std::vector<int32_t>{30, 20, 5}));
  EXPECT_EQ(own->real_tokens, 70);
  EXPECT_EQ(own->padded_tokens, 60 + 40 + 5);
  EXPECT_NEAR(own->PaddingRatio(), 1.0 - 70.0 / 105.0, 1e-12);
  EXPECT_EQ(own->BatchBegin(2), 4);
  EXPECT_EQ(own->BatchEnd(2), 5);

  auto fixed = PadBatches(lengths, 2, 40);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->padded_tokens, 5 * 40);
  EXPECT_NEAR(fixed->PaddingRatio(), 1.0 - 70.0 / 200.0, 1e-12);
}

TEST(PadBatchesTest, SampleLongerThanFixedLengthIsAnError) {
  auto r = PadBatches(std::vector<int32_t>{10, 50}, 4, 40);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "lengths[1]");
  EXPECT_FALSE(PadBatches(std::vector<int32_t>{10}, 0, 40).ok());
}

}  // namespace
}  // namespace engine::data
