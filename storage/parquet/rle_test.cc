// Bit unpacking and the RLE/bit-packed hybrid: the specification's own example, every bit width
// against a bit-by-bit reference on random values, runs resumed mid-group, and data that ends
// early or states values wider than its bit width.
#include "storage/parquet/rle.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "storage/testing/parquet_writer.h"

namespace storage::parquet {
namespace {

using storage::testing::U8;

TEST(RleTest, SpecificationExampleBitWidth3) {
  // Encodings.md: 0..7 at bit width 3 pack to 10001000 11000110 11111010.
  const uint8_t packed[] = {0b10001000, 0b11000110, 0b11111010};
  uint32_t out[8];
  UnpackBits(packed, sizeof(packed), 3, 8, out);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(out[i], i);
}

TEST(RleTest, UnpackMatchesABitByBitReferenceAtEveryWidth) {
  std::mt19937_64 rng(1);
  for (int bw = 0; bw <= 64; ++bw) {
    for (int64_t count : {1, 7, 8, 9, 31, 64, 257}) {
      std::vector<uint64_t> values(static_cast<size_t>(count));
      for (auto& v : values) v = bw == 64 ? rng() : bw == 0 ? 0 : rng() & ((1ull << bw) - 1);
      std::string packed(PackedBytes(static_cast<uint64_t>(count), bw), '\0');
      uint64_t bit = 0;
      for (uint64_t v : values) {
        for (int b = 0; b < bw; ++b, ++bit) {
          if ((v >> b) & 1) packed[bit / 8] = static_cast<char>(packed[bit / 8] | (1 << (bit % 8)));
        }
      }
      std::vector<uint64_t> out(static_cast<size_t>(count), 12345);
      UnpackBits(U8(packed), packed.size(), bw, count, out.data());
      EXPECT_EQ(out, values) << "bit width " << bw << " count " << count;
      if (bw <= 32) {
        std::vector<uint32_t> out32(static_cast<size_t>(count));
        UnpackBits(U8(packed), packed.size(), bw, count, out32.data());
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out32[i], values[i]) << bw;
      }
      if (bw <= 8) {
        std::vector<uint8_t> out8(static_cast<size_t>(count));
        UnpackBits(U8(packed), packed.size(), bw, count, out8.data());
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(out8[i], values[i]) << bw;
      }
    }
  }
}

TEST(RleTest, HybridRoundTripsMixedRunsAtEveryWidth) {
  std::mt19937 rng(2);
  for (int bw = 0; bw <= 32; ++bw) {
    std::vector<uint32_t> values;
    const uint32_t mask = bw == 32 ? 0xffffffffu : (1u << bw) - 1;
    while (values.size() < 5000) {
      const uint32_t v = rng() & mask;
      const int run = rng() % 3 == 0 ? 1 + rng() % 100 : 1;  // long repeats and singles mixed
      values.insert(values.end(), static_cast<size_t>(run), v);
    }
    const std::string encoded = testing::EncodeRleHybrid(values, bw);
    std::vector<uint32_t> out(values.size());
    RleBitPackedDecoder d(U8(encoded), encoded.size(), bw);
    ASSERT_TRUE(d.Decode(out.data(), static_cast<int64_t>(out.size())).ok()) << bw;
    EXPECT_EQ(out, values) << "bit width " << bw;
  }
}

TEST(RleTest, DecodingInPiecesResumesMidGroupAndMidRun) {
  std::vector<uint32_t> values;
  for (int i = 0; i < 1000; ++i) values.push_back(static_cast<uint32_t>((i * 7) % 13));
  values.insert(values.end(), 300, 5u);
  const std::string encoded = testing::EncodeRleHybrid(values, 4);
  RleBitPackedDecoder d(U8(encoded), encoded.size(), 4);
  std::vector<uint32_t> out(values.size());
  size_t done = 0;
  for (int64_t piece : {3, 5, 1, 13, 64, 100, 7}) {
    ASSERT_TRUE(d.Decode(out.data() + done, piece).ok());
    done += static_cast<size_t>(piece);
  }
  ASSERT_TRUE(d.Decode(out.data() + done, static_cast<int64_t>(values.size() - done)).ok());
  EXPECT_EQ(out, values);
}

TEST(RleTest, LevelsDecodeIntoBytes) {
  std::vector<uint32_t> levels;
  for (int row = 0; row < 50; ++row) {
    levels.push_back(0);
    levels.insert(levels.end(), 25, 1);
  }
  const std::string encoded = testing::EncodeRleHybrid(levels, 1);
  std::vector<uint8_t> out(levels.size());
  RleBitPackedDecoder d(U8(encoded), encoded.size(), 1);
  ASSERT_TRUE(d.Decode(out.data(), static_cast<int64_t>(out.size())).ok());
  for (size_t i = 0; i < levels.size(); ++i) ASSERT_EQ(out[i], levels[i]) << i;
}

TEST(RleTest, DataThatEndsBeforeTheValuesIsAnError) {
  std::vector<uint32_t> values(100);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint32_t>(i % 5);
  const std::string encoded = testing::EncodeRleHybrid(values, 3);
  std::vector<uint32_t> out(values.size());
  // One bit-packed run (no value repeats 8 times): a header byte and 13 groups of 3 bytes, of
  // which the 100 values need the first 38.
  ASSERT_EQ(encoded.size(), 40u);
  for (size_t n = 0; n < encoded.size(); ++n) {
    RleBitPackedDecoder d(U8(encoded), n, 3);
    EXPECT_EQ(d.Decode(out.data(), 100).ok(), n >= 1 + PackedBytes(100, 3)) << n;
  }
  // Asking for more than was encoded runs into the end too (the last group is padded to 8,
  // so 104 values are there, not 105).
  std::vector<uint32_t> more(200);
  RleBitPackedDecoder d(U8(encoded), encoded.size(), 3);
  EXPECT_TRUE(d.Decode(more.data(), 104).ok());
  EXPECT_FALSE(d.Decode(more.data(), 1).ok());
}

TEST(RleTest, ALastBitPackedRunMayDropItsPadding) {
  std::vector<uint32_t> values = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1};  // 10 values: 2 groups
  std::string encoded = testing::EncodeBitPackedRun(values, 2);   // 1 + 4 bytes
  encoded.pop_back();  // the second group's padding byte: values 8 and 9 are in the first bits
  std::vector<uint32_t> out(10);
  RleBitPackedDecoder d(U8(encoded), encoded.size(), 2);
  ASSERT_TRUE(d.Decode(out.data(), 10).ok());
  EXPECT_EQ(out, values);
}

TEST(RleTest, RunValueWiderThanTheBitWidthIsAnError) {
  // RLE run of 10 copies of 9 at bit width 3 (one value byte).
  const std::string encoded = {static_cast<char>(10 << 1), 9};
  std::vector<uint32_t> out(10);
  RleBitPackedDecoder d(U8(encoded), encoded.size(), 3);
  EXPECT_FALSE(d.Decode(out.data(), 10).ok());
}

TEST(RleTest, HugeRunHeadersAreErrorsNotAllocations) {
  // A bit-packed header claiming 2^34 groups, and an RLE run of 2^40.
  testing::CompactWriter w;
  w.Varint((uint64_t{1} << 35) | 1);
  std::vector<uint32_t> out(16);
  RleBitPackedDecoder a(U8(w.bytes()), w.bytes().size(), 1);
  EXPECT_FALSE(a.Decode(out.data(), 16).ok());
  testing::CompactWriter r;
  r.Varint(uint64_t{1} << 41);
  r.Byte(1);
  RleBitPackedDecoder b(U8(r.bytes()), r.bytes().size(), 1);
  EXPECT_FALSE(b.Decode(out.data(), 16).ok());
}

TEST(RleTest, DeprecatedBitPackedLevelsAreMostSignificantBitFirst) {
  // Encodings.md: 0..7 at width 3 pack to 00000101 00111001 01110111.
  const uint8_t packed[] = {0b00000101, 0b00111001, 0b01110111};
  uint8_t out[8];
  ASSERT_TRUE(DecodeBitPackedMsbFirst(packed, sizeof(packed), 3, 8, out).ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], i);
  EXPECT_FALSE(DecodeBitPackedMsbFirst(packed, 2, 3, 8, out).ok());
}

}  // namespace
}  // namespace storage::parquet
