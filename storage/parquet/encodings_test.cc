// Value decoders: PLAIN for every type, BYTE_STREAM_SPLIT, DELTA_BINARY_PACKED with its edge
// cases (one value, partial blocks, wrapping deltas, widths 0 and 64, missing padding, bad
// headers), the delta byte-array encodings, dictionary gathers, and the codecs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/parquet/compression.h"
#include "storage/parquet/delta.h"
#include "storage/parquet/encodings.h"
#include "storage/testing/parquet_writer.h"

namespace storage::parquet {
namespace {

using storage::testing::U8;

ColumnValues Values(PhysicalType type, int32_t length = 0) {
  ColumnValues v;
  v.Reset(type, length);
  return v;
}

template <typename T>
std::string Raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(PlainTest, FixedWidthTypesAreLittleEndianBackToBack) {
  const std::vector<float> f = {1.5f, -0.0f, 3e38f};
  ColumnValues v = Values(PhysicalType::kFloat);
  size_t used = 0;
  ASSERT_TRUE(DecodePlain(U8(Raw(f)), f.size() * 4, 3, &v, &used).ok());
  EXPECT_EQ(v.f32, f);
  EXPECT_EQ(used, 12u);
  EXPECT_FALSE(DecodePlain(U8(Raw(f)), 11, 3, &v).ok());

  const std::vector<int64_t> i = {INT64_MIN, 0, INT64_MAX};
  ColumnValues w = Values(PhysicalType::kInt64);
  ASSERT_TRUE(DecodePlain(U8(Raw(i)), 24, 3, &w).ok());
  EXPECT_EQ(w.i64, i);
}

TEST(PlainTest, BooleansAreBitsLsbFirst) {
  const std::string bits = {static_cast<char>(0b10100101), 0b1};
  ColumnValues v = Values(PhysicalType::kBoolean);
  ASSERT_TRUE(DecodePlain(U8(bits), 2, 9, &v).ok());
  EXPECT_EQ(v.bools, (std::vector<uint8_t>{1, 0, 1, 0, 0, 1, 0, 1, 1}));
  EXPECT_FALSE(DecodePlain(U8(bits), 1, 9, &v).ok());
}

TEST(PlainTest, ByteArraysAndTheirLyingLengths) {
  std::string data;
  for (std::string s : {"", "robot", "機械"}) {
    uint32_t n = static_cast<uint32_t>(s.size());
    data.append(reinterpret_cast<const char*>(&n), 4);
    data += s;
  }
  ColumnValues v = Values(PhysicalType::kByteArray);
  ASSERT_TRUE(DecodePlain(U8(data), data.size(), 3, &v).ok());
  ASSERT_EQ(v.size(), 3);
  EXPECT_EQ(v.View(0), "");
  EXPECT_EQ(v.View(1), "robot");
  EXPECT_EQ(v.View(2), "機械");
  // A length past the end, and more values than the bytes could hold even if all were empty.
  std::string lying = data;
  lying[4] = '\x7f';
  ColumnValues w = Values(PhysicalType::kByteArray);
  EXPECT_FALSE(DecodePlain(U8(lying), lying.size(), 3, &w).ok());
  EXPECT_FALSE(DecodePlain(U8(data), data.size(), int64_t{1} << 40, &w).ok());
}

TEST(PlainTest, FixedLenByteArrayAndInt96) {
  const std::string data = "abcdefghijkl";
  ColumnValues v = Values(PhysicalType::kFixedLenByteArray, 4);
  ASSERT_TRUE(DecodePlain(U8(data), 12, 3, &v).ok());
  EXPECT_EQ(v.View(2), "ijkl");
  ColumnValues t = Values(PhysicalType::kInt96);
  ASSERT_TRUE(DecodePlain(U8(data), 12, 1, &t).ok());
  EXPECT_EQ(t.View(0), data);
  EXPECT_FALSE(DecodePlain(U8(data), 12, 2, &t).ok());
}

TEST(ByteStreamSplitTest, FloatsDoublesAndFixedBytesRoundTrip) {
  std::mt19937 rng(3);
  std::vector<float> f(1001);
  for (auto& x : f) x = static_cast<float>(rng()) / 7.0f - 1e8f;
  std::vector<double> d(333);
  for (auto& x : d) x = static_cast<double>(rng()) * 1e-3 - 5.0;
  ColumnValues vf = Values(PhysicalType::kFloat);
  const std::string ef = testing::EncodeByteStreamSplit(f.data(), f.size(), 4);
  ASSERT_TRUE(DecodeByteStreamSplit(U8(ef), ef.size(), 1001, &vf).ok());
  EXPECT_EQ(vf.f32, f);
  ColumnValues vd = Values(PhysicalType::kDouble);
  const std::string ed = testing::EncodeByteStreamSplit(d.data(), d.size(), 8);
  ASSERT_TRUE(DecodeByteStreamSplit(U8(ed), ed.size(), 333, &vd).ok());
  EXPECT_EQ(vd.f64, d);
  const std::string fixed = "abcXYZ";  // streams: a,b,c / X,Y,Z for 3 values of 2 bytes
  ColumnValues vb = Values(PhysicalType::kFixedLenByteArray, 2);
  ASSERT_TRUE(DecodeByteStreamSplit(U8(fixed), 6, 3, &vb).ok());
  EXPECT_EQ(vb.View(0), "aX");
  EXPECT_EQ(vb.View(2), "cZ");
  // The streams must fill the section exactly.
  EXPECT_FALSE(DecodeByteStreamSplit(U8(ef), ef.size() - 1, 1001, &vf).ok());
  EXPECT_FALSE(DecodeByteStreamSplit(U8(ef), ef.size(), 1000, &vf).ok());
}

std::vector<int64_t> DecodeDelta64(const std::string& e, int64_t n, common::Status* status) {
  std::vector<int64_t> out;
  *status = DecodeDeltaBinaryPacked<int64_t>(U8(e), e.size(), n, &out);
  return out;
}

TEST(DeltaTest, SpecificationExamplesAndSmallCounts) {
  for (const std::vector<int64_t>& v : std::vector<std::vector<int64_t>>{
           {1, 2, 3, 4, 5}, {7, 5, 3, 1, 2, 3, 4, 5}, {}, {42}, {-1, -1}}) {
    const std::string e = testing::EncodeDeltaBinaryPacked(v);
    common::Status s;
    EXPECT_EQ(DecodeDelta64(e, static_cast<int64_t>(v.size()), &s), v);
    EXPECT_TRUE(s.ok()) << s.message();
  }
}

TEST(DeltaTest, RandomValuesWithWrappingDeltasAndEveryBlockShape) {
  std::mt19937_64 rng(4);
  for (auto [block, mini] :
       std::vector<std::pair<int, int>>{{128, 4}, {128, 1}, {256, 8}, {1024, 2}}) {
    for (size_t n : {2u, 33u, 129u, 1000u, 4097u}) {
      std::vector<int64_t> v(n);
      for (size_t i = 0; i < n; ++i) {
        // Extremes side by side make deltas that overflow, and miniblocks of width 64.
        v[i] = i % 11 == 0 ? INT64_MIN : i % 11 == 1 ? INT64_MAX : static_cast<int64_t>(rng());
        if (i > 200 && i < 400) v[i] = 5;  // a stretch of width-0 miniblocks
      }
      const std::string e = testing::EncodeDeltaBinaryPacked(v, block, mini);
      common::Status s;
      ASSERT_EQ(DecodeDelta64(e, static_cast<int64_t>(n), &s), v)
          << block << "/" << mini << " " << n;
      ASSERT_TRUE(s.ok());
      // And a prefix only.
      std::vector<int64_t> prefix(v.begin(), v.begin() + static_cast<long>(n / 2));
      EXPECT_EQ(DecodeDelta64(e, static_cast<int64_t>(n / 2), &s), prefix);
    }
  }
}

TEST(DeltaTest, Int32WrapsIn32Bits) {
  std::vector<int64_t> v = {INT32_MIN, INT32_MAX, INT32_MIN, 0, -1, INT32_MAX};
  // An INT32 writer computes deltas modulo 2^32, so no miniblock is wider than 32 bits.
  const std::string e = testing::EncodeDeltaBinaryPacked(v, 128, 4, /*int32=*/true);
  std::vector<int32_t> out;
  ASSERT_TRUE(DecodeDeltaBinaryPacked<int32_t>(U8(e), e.size(), 6, &out).ok());
  ASSERT_EQ(out.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(out[i], v[i]);
}

TEST(DeltaTest, ConsumedIsTheEndOfThePaddedLastMiniblock) {
  std::vector<int64_t> v;
  for (int i = 0; i < 40; ++i) v.push_back(i * i);
  const std::string e = testing::EncodeDeltaBinaryPacked(v);
  std::vector<int64_t> out;
  size_t consumed = 0;
  const std::string with_tail = e + "tail";
  ASSERT_TRUE(
      DecodeDeltaBinaryPacked<int64_t>(U8(with_tail), with_tail.size(), 40, &out, &consumed).ok());
  EXPECT_EQ(consumed, e.size());
}

TEST(DeltaTest, MalformedHeadersAndShortDataAreErrors) {
  std::vector<int64_t> out;
  auto decode = [&](const std::string& e, int64_t n) {
    out.clear();
    return DecodeDeltaBinaryPacked<int64_t>(U8(e), e.size(), n, &out).ok();
  };
  testing::CompactWriter bad_block;  // block size 100 (not a multiple of 128)
  for (uint64_t x : {100, 4, 10, 0}) bad_block.Varint(x);
  EXPECT_FALSE(decode(bad_block.bytes(), 10));
  testing::CompactWriter bad_mini;  // 3 miniblocks do not divide 128
  for (uint64_t x : {128, 3, 10, 0}) bad_mini.Varint(x);
  EXPECT_FALSE(decode(bad_mini.bytes(), 10));
  testing::CompactWriter huge_block;  // 2^40 values a block
  for (uint64_t x : {uint64_t{1} << 40, uint64_t{4}, uint64_t{10}, uint64_t{0}}) {
    huge_block.Varint(x);
  }
  EXPECT_FALSE(decode(huge_block.bytes(), 10));

  std::vector<int64_t> v(300);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i * 1000003 % 977);
  const std::string e = testing::EncodeDeltaBinaryPacked(v);
  EXPECT_TRUE(decode(e, 300));
  EXPECT_FALSE(decode(e, 301));  // more than the header's count
  // Every truncation that cuts into needed values is an error, never a read past the end.
  for (size_t n = 0; n + 40 < e.size(); ++n) EXPECT_FALSE(decode(e.substr(0, n), 300)) << n;

  // A miniblock width past the type's bits.
  std::string wide = testing::EncodeDeltaBinaryPacked({1, 2, 3});
  // The header is 5 bytes (128 takes two), then the min delta (1 byte) and 4 widths.
  wide[6] = 65;
  EXPECT_FALSE(decode(wide, 3));
  std::vector<int32_t> out32;
  std::string wide32 = testing::EncodeDeltaBinaryPacked({1, 2, 3});
  wide32[6] = 33;
  EXPECT_FALSE(DecodeDeltaBinaryPacked<int32_t>(U8(wide32), wide32.size(), 3, &out32).ok());
}

TEST(DeltaTest, ALastMiniblockWithoutPaddingIsAcceptedAtTheEnd) {
  std::vector<int64_t> v = {10, 20, 31, 43, 56};  // 4 deltas: the first miniblock of 32 holds them
  std::string e = testing::EncodeDeltaBinaryPacked(v);
  // Width of the deltas - min (0,1,2,3) is 2: 32 values take 8 bytes, 4 need 1.
  e.resize(e.size() - 7);
  common::Status s;
  EXPECT_EQ(DecodeDelta64(e, 5, &s), v);
  EXPECT_TRUE(s.ok()) << s.message();
}

std::string DeltaLengths(const std::vector<std::string>& values) {
  std::vector<int64_t> lengths;
  for (const auto& s : values) lengths.push_back(static_cast<int64_t>(s.size()));
  return testing::EncodeDeltaBinaryPacked(lengths);
}

TEST(DeltaByteArrayTest, DeltaLengthByteArray) {
  const std::vector<std::string> values = {"Hello", "World", "Foobar", "ABCDEF", ""};
  std::string e = DeltaLengths(values);
  for (const auto& s : values) e += s;
  ColumnValues v = Values(PhysicalType::kByteArray);
  ASSERT_TRUE(DecodeDeltaLengthByteArray(U8(e), e.size(), 5, &v).ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(v.View(i), values[static_cast<size_t>(i)]);
  ColumnValues w = Values(PhysicalType::kByteArray);
  EXPECT_FALSE(DecodeDeltaLengthByteArray(U8(e), e.size() - 1, 5, &w).ok());
  EXPECT_FALSE(DecodeDeltaLengthByteArray(U8(e), e.size(), 4, &w).ok());  // count mismatch
}

TEST(DeltaByteArrayTest, FrontCodingFromTheSpecification) {
  // "axis", "axle", "babble", "babyhood": prefixes 0 2 0 3, suffixes "axis" "le" "babble" "yhood".
  std::string e = testing::EncodeDeltaBinaryPacked({0, 2, 0, 3}) +
                  testing::EncodeDeltaBinaryPacked({4, 2, 6, 5}) + "axislebabbleyhood";
  ColumnValues v = Values(PhysicalType::kByteArray);
  ASSERT_TRUE(DecodeDeltaByteArray(U8(e), e.size(), 4, 1 << 20, &v).ok());
  EXPECT_EQ(v.View(0), "axis");
  EXPECT_EQ(v.View(1), "axle");
  EXPECT_EQ(v.View(2), "babble");
  EXPECT_EQ(v.View(3), "babyhood");
  // A prefix longer than the previous value, and an expansion past the byte bound.
  std::string bad =
      testing::EncodeDeltaBinaryPacked({0, 5}) + testing::EncodeDeltaBinaryPacked({2, 1}) + "abc";
  ColumnValues w = Values(PhysicalType::kByteArray);
  EXPECT_FALSE(DecodeDeltaByteArray(U8(bad), bad.size(), 2, 1 << 20, &w).ok());
  std::vector<int64_t> prefixes(1000, 100), suffixes(1000, 0);
  prefixes[0] = 0;
  suffixes[0] = 100;
  std::string big = testing::EncodeDeltaBinaryPacked(prefixes) +
                    testing::EncodeDeltaBinaryPacked(suffixes) + std::string(100, 'x');
  ColumnValues x = Values(PhysicalType::kByteArray);
  EXPECT_TRUE(DecodeDeltaByteArray(U8(big), big.size(), 1000, 100000, &x).ok());
  ColumnValues y = Values(PhysicalType::kByteArray);
  common::Status s = DecodeDeltaByteArray(U8(big), big.size(), 1000, 99999, &y);
  EXPECT_EQ(s.code(), common::Code::kResourceExhausted) << s.message();
}

TEST(DictionaryTest, GatherChecksEveryIndexAndTheExpansion) {
  ColumnValues dict = Values(PhysicalType::kByteArray);
  std::string data;
  for (const std::string& s : {std::string("a"), std::string(1000, 'b')}) {
    uint32_t n = static_cast<uint32_t>(s.size());
    data.append(reinterpret_cast<const char*>(&n), 4);
    data += s;
  }
  ASSERT_TRUE(DecodePlain(U8(data), data.size(), 2, &dict).ok());
  const std::vector<uint32_t> ok = {1, 0, 1};
  ColumnValues v = Values(PhysicalType::kByteArray);
  ASSERT_TRUE(GatherDictionary(dict, ok.data(), 3, 1 << 20, &v).ok());
  EXPECT_EQ(v.View(1), "a");
  EXPECT_EQ(v.View(2).size(), 1000u);
  const std::vector<uint32_t> past = {0, 2};
  EXPECT_FALSE(GatherDictionary(dict, past.data(), 2, 1 << 20, &v).ok());
  const std::vector<uint32_t> many(5000, 1);
  EXPECT_EQ(GatherDictionary(dict, many.data(), 5000, 1 << 20, &v).code(),
            common::Code::kResourceExhausted);
}

TEST(CompressionTest, EveryCodecRoundTripsAndRefusesWrongSizes) {
  std::string raw;
  for (int i = 0; i < 100000; ++i) raw += static_cast<char>((i * 31) % 7 + (i % 1000 == 0));
  for (int32_t codec : {0, 1, 2, 6}) {
    const std::string c = testing::CompressPage(codec, raw);
    std::string out(raw.size(), '\0');
    ASSERT_TRUE(
        Decompress(codec, U8(c), c.size(), reinterpret_cast<uint8_t*>(out.data()), out.size()).ok())
        << codec;
    EXPECT_EQ(out, raw) << codec;
    // A header that states the wrong uncompressed size, either way.
    std::string small(raw.size() - 1, '\0'), large(raw.size() + 1, '\0');
    EXPECT_FALSE(
        Decompress(codec, U8(c), c.size(), reinterpret_cast<uint8_t*>(small.data()), small.size())
            .ok())
        << codec;
    EXPECT_FALSE(
        Decompress(codec, U8(c), c.size(), reinterpret_cast<uint8_t*>(large.data()), large.size())
            .ok())
        << codec;
    // Truncated and corrupted input.
    if (codec != 0) {
      EXPECT_FALSE(
          Decompress(codec, U8(c), c.size() / 2, reinterpret_cast<uint8_t*>(out.data()), out.size())
              .ok())
          << codec;
      std::string flipped = c;
      for (size_t i = 0; i < flipped.size(); i += 7) flipped[i] = static_cast<char>(~flipped[i]);
      EXPECT_FALSE(Decompress(codec, U8(flipped), flipped.size(),
                              reinterpret_cast<uint8_t*>(out.data()), out.size())
                       .ok())
          << codec;
    }
  }
  std::string out(10, '\0');
  common::Status s = Decompress(7, U8(raw), 10, reinterpret_cast<uint8_t*>(out.data()), 10);
  EXPECT_EQ(s.code(), common::Code::kUnimplemented);
  EXPECT_NE(s.message().find("LZ4_RAW"), std::string::npos);
}

TEST(CompressionTest, ConcatenatedGzipMembersAreOnePage) {
  const std::string a = testing::CompressPage(2, "first half, ");
  const std::string b = testing::CompressPage(2, "second half");
  const std::string both = a + b;
  std::string out(23, '\0');
  ASSERT_TRUE(
      Decompress(2, U8(both), both.size(), reinterpret_cast<uint8_t*>(out.data()), out.size())
          .ok());
  EXPECT_EQ(out, "first half, second half");
}

}  // namespace
}  // namespace storage::parquet
