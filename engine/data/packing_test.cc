#include "engine/data/packing.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "engine/data/embodied_lengths.h"

namespace engine::data {
namespace {

std::vector<int32_t> EmbodiedLengths(int n, uint64_t seed) {
  EmbodiedLengthSampler sampler(seed);
  return SampleLengths(sampler.Draw(n));
}

using Packer = common::Result<PackedRows> (*)(std::span<const int32_t>, int);

class PackerTest : public ::testing::TestWithParam<Packer> {};

TEST_P(PackerTest, EmbodiedDistributionPacksAbove99Percent) {
  const auto lengths = EmbodiedLengths(20000, 3);
  auto packed = GetParam()(lengths, 512);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ASSERT_TRUE(ValidatePacking(*packed, lengths).ok());
  EXPECT_GE(packed->Efficiency(), 0.99);
  // The efficiency is real tokens over rows × budget.
  int64_t total = 0;
  for (int32_t l : lengths) total += l;
  EXPECT_EQ(packed->real_tokens, total);
  EXPECT_DOUBLE_EQ(packed->Efficiency(), static_cast<double>(total) / (512.0 * packed->num_rows()));
}

TEST_P(PackerTest, CuSeqlensArePrefixSumsOfTheRow) {
  const std::vector<int32_t> lengths = {5, 3, 8, 2, 7, 1, 4};  // 30 tokens
  auto packed = GetParam()(lengths, 10);
  ASSERT_TRUE(packed.ok());
  ASSERT_TRUE(ValidatePacking(*packed, lengths).ok());
  EXPECT_EQ(packed->num_rows(), 3);  // 30 tokens in rows of 10: BFD is perfect here
  for (int r = 0; r < packed->num_rows(); ++r) {
    auto row = packed->Row(r);
    auto cu = packed->CuSeqlens(r);
    ASSERT_EQ(cu.size(), row.size() + 1);
    int32_t acc = 0;
    EXPECT_EQ(cu[0], 0);
    for (size_t i = 0; i < row.size(); ++i) {
      acc += lengths[row[i]];
      EXPECT_EQ(cu[i + 1], acc);
    }
    EXPECT_LE(packed->RowTokens(r), 10);
  }
}

TEST_P(PackerTest, RandomLengthsPlacedOnceAndWithinBudget) {
  std::mt19937 rng(11);
  for (int budget : {1, 7, 64, 512, 5000}) {
    std::uniform_int_distribution<int> len(1, budget);
    std::vector<int32_t> lengths(3000);
    for (auto& l : lengths) l = len(rng);
    auto packed = GetParam()(lengths, budget);
    ASSERT_TRUE(packed.ok());
    EXPECT_TRUE(ValidatePacking(*packed, lengths).ok()) << "budget " << budget;
  }
}

TEST_P(PackerTest, DeterministicForASeed) {
  const auto lengths = EmbodiedLengths(5000, 9);
  auto a = GetParam()(lengths, 512);
  auto b = GetParam()(EmbodiedLengths(5000, 9), 512);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->row_begin, b->row_begin);
  EXPECT_EQ(a->sample_index, b->sample_index);
  EXPECT_EQ(a->cu_seqlens, b->cu_seqlens);
}

TEST_P(PackerTest, OversizeSampleIsAnErrorNamingIt) {
  const std::vector<int32_t> lengths = {100, 600, 30};
  auto packed = GetParam()(lengths, 512);
  ASSERT_FALSE(packed.ok());
  EXPECT_EQ(packed.status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(packed.status().field(), "lengths[1]");
  EXPECT_FALSE(GetParam()(std::vector<int32_t>{0}, 512).ok());
  EXPECT_FALSE(GetParam()(std::vector<int32_t>{1}, 0).ok());
}

TEST_P(PackerTest, EmptyInputGivesNoRows) {
  auto packed = GetParam()(std::vector<int32_t>{}, 512);
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(packed->num_rows(), 0);
  EXPECT_EQ(packed->Efficiency(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(BothPackers, PackerTest,
                         ::testing::Values(&PackBestFitDecreasing,
                                           &PackBestFitDecreasingHistogram));

// Bulk placement by length takes the same decisions as one-at-a-time best fit, so the two give
// the same rows up to which sample of a given length sits where.
TEST(HistogramPackerTest, AgreesWithExactBestFitDecreasing) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int32_t> lengths;
    if (trial < 3) {
      lengths = EmbodiedLengths(20000, 100 + trial);
    } else {
      std::uniform_int_distribution<int> len(1, 300);
      lengths.resize(10000);
      for (auto& l : lengths) l = len(rng);
    }
    auto exact = PackBestFitDecreasing(lengths, 512);
    auto hist = PackBestFitDecreasingHistogram(lengths, 512);
    ASSERT_TRUE(exact.ok() && hist.ok());
    ASSERT_TRUE(ValidatePacking(*hist, lengths).ok());
    EXPECT_NEAR(hist->Efficiency(), exact->Efficiency(), 1e-3);
    EXPECT_EQ(hist->num_rows(), exact->num_rows()) << "trial " << trial;
    std::vector<int32_t> fill_exact, fill_hist;
    for (int r = 0; r < exact->num_rows(); ++r) fill_exact.push_back(exact->RowTokens(r));
    for (int r = 0; r < hist->num_rows(); ++r) fill_hist.push_back(hist->RowTokens(r));
    std::sort(fill_exact.begin(), fill_exact.end());
    std::sort(fill_hist.begin(), fill_hist.end());
    EXPECT_EQ(fill_exact, fill_hist) << "trial " << trial;
  }
}

TEST(ValidatePackingTest, CatchesADuplicatedSample) {
  const std::vector<int32_t> lengths = {4, 4};
  auto packed = PackBestFitDecreasing(lengths, 8);
  ASSERT_TRUE(packed.ok());
  packed->sample_index[1] = packed->sample_index[0];
  EXPECT_FALSE(ValidatePacking(*packed, lengths).ok());
}

}  // namespace
}  // namespace engine::data
