// The Thrift compact reader on hand-made bytes: varints and zigzag at their limits, field id
// deltas and long-form ids, bools as headers and as list bytes, skipping every type, and the
// bounds (lists longer than the bytes left, nesting past the limit, truncation anywhere).
#include "storage/parquet/thrift_compact.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "storage/parquet/metadata.h"
#include "storage/testing/parquet_writer.h"

namespace storage::parquet {
namespace {

using testing::CompactWriter;

// The reader keeps a pointer into `s`: pass a string that outlives it.
CompactReader Reader(const std::string& s, int depth = CompactReader::kDefaultMaxDepth) {
  return CompactReader(reinterpret_cast<const uint8_t*>(s.data()), s.size(), depth);
}

TEST(ThriftCompactTest, VarintsAndZigZagRoundTripAtTheLimits) {
  for (int64_t v :
       std::vector<int64_t>{0, 1, -1, 63, -64, 64, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN}) {
    CompactWriter w;
    w.ZigZag(v);
    CompactReader r = Reader(w.bytes());
    int64_t got = 0;
    ASSERT_TRUE(r.ReadZigZag(&got).ok()) << v;
    EXPECT_EQ(got, v);
    EXPECT_EQ(r.remaining(), 0u);
  }
  CompactWriter w;
  w.Varint(UINT64_MAX);
  EXPECT_EQ(w.bytes().size(), 10u);
  uint64_t u = 0;
  CompactReader r = Reader(w.bytes());
  ASSERT_TRUE(r.ReadVarint(&u).ok());
  EXPECT_EQ(u, UINT64_MAX);
}

TEST(ThriftCompactTest, OverlongAndTruncatedVarintsAreErrors) {
  uint64_t u = 0;
  // 11 continuation bytes.
  std::string overlong(10, '\x80');
  overlong += '\x01';
  EXPECT_FALSE(Reader(overlong).ReadVarint(&u).ok());
  // The tenth byte may only carry the 64th bit.
  std::string too_big(9, '\xff');
  too_big += '\x02';
  EXPECT_FALSE(Reader(too_big).ReadVarint(&u).ok());
  EXPECT_FALSE(Reader("\x80\x80").ReadVarint(&u).ok());
  EXPECT_FALSE(Reader("").ReadVarint(&u).ok());
}

TEST(ThriftCompactTest, StructFieldsWithShortAndLongIdsAndUnknownFieldsSkipped) {
  CompactWriter w;
  w.StructBegin();
  w.I32(1, -7);
  w.Binary(2, "hello");
  w.I64(20, INT64_MIN);  // delta 18: long form
  w.Bool(21, true);
  w.Bool(22, false);
  // Unknown fields of every kind, to be skipped.
  w.FieldHeader(30, ThriftType::kDouble);
  for (int i = 0; i < 8; ++i) w.Byte(0x11);
  w.FieldHeader(31, ThriftType::kStruct);
  w.StructBegin();
  w.ListBegin(1, ThriftType::kTrue, 3);  // bools in a list are one byte each
  w.Byte(1);
  w.Byte(2);
  w.Byte(0);
  w.FieldHeader(2, ThriftType::kMap);
  w.Varint(2);
  w.Byte(0x85);  // binary -> i32
  w.RawBinary("k1");
  w.ZigZag(5);
  w.RawBinary("k2");
  w.ZigZag(6);
  w.StructEnd();
  w.FieldHeader(32, ThriftType::kI8);
  w.Byte(0xff);
  w.I32(100, 12345);
  w.StructEnd();

  CompactReader r = Reader(w.bytes());
  int32_t a = 0, last = 0;
  int64_t c = 0;
  std::string b;
  bool t = false, f = true;
  ASSERT_TRUE(r.ReadStruct([&](int16_t id, ThriftType type) -> common::Status {
                 switch (id) {
                   case 1:
                     return r.ReadI32(type, &a);
                   case 2:
                     return r.ReadBinary(type, &b);
                   case 20:
                     return r.ReadI64(type, &c);
                   case 21:
                     return r.ReadBool(type, &t);
                   case 22:
                     return r.ReadBool(type, &f);
                   case 100:
                     return r.ReadI32(type, &last);
                   default:
                     return r.Skip(type);
                 }
               }).ok());
  EXPECT_EQ(a, -7);
  EXPECT_EQ(b, "hello");
  EXPECT_EQ(c, INT64_MIN);
  EXPECT_TRUE(t);
  EXPECT_FALSE(f);
  EXPECT_EQ(last, 12345);
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(ThriftCompactTest, BoolListElementsAreBytes) {
  CompactWriter w;
  w.StructBegin();
  w.ListBegin(1, ThriftType::kTrue, 4);
  for (uint8_t v : {1, 0, 2, 1}) w.Byte(v);
  w.StructEnd();
  CompactReader r = Reader(w.bytes());
  std::vector<bool> got;
  ASSERT_TRUE(r.ReadStruct([&](int16_t, ThriftType type) {
                 return r.ReadList(type, [&](ThriftType et) -> common::Status {
                   bool v = false;
                   EMBODY_RETURN_IF_ERROR(r.ReadBool(et, &v));
                   got.push_back(v);
                   return common::Status::Ok();
                 });
               }).ok());
  EXPECT_EQ(got, (std::vector<bool>{true, false, false, true}));
}

TEST(ThriftCompactTest, WrongWireTypeIsAnErrorNamingBoth) {
  CompactWriter w;
  w.StructBegin();
  w.Binary(1, "x");
  w.StructEnd();
  CompactReader r = Reader(w.bytes());
  int32_t v = 0;
  common::Status s = r.ReadStruct([&](int16_t, ThriftType type) { return r.ReadI32(type, &v); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("binary"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("i32"), std::string::npos) << s.message();
}

TEST(ThriftCompactTest, ListLongerThanTheBytesLeftIsRefusedBeforeReading) {
  CompactWriter w;
  w.StructBegin();
  w.ListBegin(1, ThriftType::kStruct, 1u << 30);
  CompactReader r = Reader(w.bytes());
  int elements = 0;
  common::Status s = r.ReadStruct([&](int16_t, ThriftType type) {
    return r.ReadList(type, [&](ThriftType) {
      ++elements;
      return common::Status::Ok();
    });
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(elements, 0);
  EXPECT_NE(s.message().find("1073741824 elements"), std::string::npos) << s.message();
}

TEST(ThriftCompactTest, BinaryLongerThanTheBytesLeftIsAnError) {
  CompactWriter w;
  w.Varint(1000);
  w.Byte('a');
  std::string out;
  CompactReader r = Reader(w.bytes());
  EXPECT_FALSE(r.ReadBinary(ThriftType::kBinary, &out).ok());
}

TEST(ThriftCompactTest, NestingPastTheLimitStopsWhenSkipping) {
  // 100 structs, each the first field of the one outside it: recursion would go 100 deep.
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += '\x1c';  // field 1, struct
  deep += std::string(101, '\0');
  CompactReader r = Reader(deep, 16);
  common::Status s = r.Skip(ThriftType::kStruct);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nesting deeper than 16"), std::string::npos) << s.message();
  // Within the limit it skips cleanly.
  CompactReader ok = Reader(deep, 128);
  EXPECT_TRUE(ok.Skip(ThriftType::kStruct).ok());
  EXPECT_EQ(ok.remaining(), 0u);
}

TEST(ThriftCompactTest, NestedListsCountAgainstTheDepthLimit) {
  std::string deep;
  for (int i = 0; i < 64; ++i) deep += '\x19';  // a list of one list
  deep += '\x05';                               // ... of no i32
  CompactReader r = Reader(deep, 32);
  EXPECT_FALSE(r.Skip(ThriftType::kList).ok());
}

TEST(ThriftCompactTest, EveryTruncationOfAStructIsAnErrorNotACrash) {
  CompactWriter w;
  w.StructBegin();
  w.I32(1, 300);
  w.Binary(2, "abcdef");
  w.ListBegin(3, ThriftType::kI64, 3);
  w.ZigZag(1);
  w.ZigZag(-1000000);
  w.ZigZag(INT64_MAX);
  w.FieldHeader(4, ThriftType::kDouble);
  for (int i = 0; i < 8; ++i) w.Byte(0);
  w.StructEnd();
  const std::string full = w.bytes();
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string cut = full.substr(0, n);
    CompactReader r = Reader(cut);
    EXPECT_FALSE(r.Skip(ThriftType::kStruct).ok()) << n;
  }
  CompactReader r = Reader(full);
  EXPECT_TRUE(r.Skip(ThriftType::kStruct).ok());
}

TEST(ThriftCompactTest, FieldIdsOutOfRangeAreErrors) {
  // Long-form id 0 and a delta that carries the id past 32767.
  const std::string zero_id("\x05\x00\x02\x00", 4);
  CompactReader zero = Reader(zero_id);
  EXPECT_FALSE(zero.Skip(ThriftType::kStruct).ok());
  CompactWriter w;
  w.StructBegin();
  w.I32(32767, 1);
  w.Byte(0x15);  // delta 1 -> 32768
  w.ZigZag(1);
  w.StructEnd();
  CompactReader r = Reader(w.bytes());
  EXPECT_FALSE(r.Skip(ThriftType::kStruct).ok());
}

TEST(ThriftCompactTest, PageHeaderRoundTripsThroughTheTestSerializer) {
  PageHeader h;
  h.type = 3;
  h.uncompressed_page_size = 1234;
  h.compressed_page_size = 567;
  h.crc = -5;
  DataPageHeaderV2 v2;
  v2.num_values = 100;
  v2.num_nulls = 3;
  v2.num_rows = 10;
  v2.encoding = 8;
  v2.definition_levels_byte_length = 7;
  v2.repetition_levels_byte_length = 9;
  v2.is_compressed = false;
  h.data_page_v2 = v2;
  const std::string bytes = testing::SerializePageHeader(h) + "trailing page body";
  PageHeader got;
  size_t used = 0;
  ASSERT_TRUE(
      ParsePageHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &got, &used)
          .ok());
  EXPECT_EQ(used, bytes.size() - std::string("trailing page body").size());
  EXPECT_EQ(got.type, 3);
  EXPECT_EQ(got.uncompressed_page_size, 1234);
  EXPECT_EQ(got.compressed_page_size, 567);
  EXPECT_EQ(got.crc, -5);
  ASSERT_TRUE(got.data_page_v2.has_value());
  EXPECT_EQ(got.data_page_v2->num_nulls, 3);
  EXPECT_EQ(got.data_page_v2->repetition_levels_byte_length, 9);
  EXPECT_FALSE(got.data_page_v2->is_compressed);
}

TEST(ThriftCompactTest, PageHeaderWithoutRequiredFieldsOrWithNegativeSizesIsRefused) {
  CompactWriter w;
  w.StructBegin();
  w.I32(1, 0);
  w.I32(2, 10);  // no compressed_page_size
  w.StructEnd();
  PageHeader h;
  size_t used = 0;
  const std::string a = w.bytes();
  common::Status s =
      ParsePageHeader(reinterpret_cast<const uint8_t*>(a.data()), a.size(), &h, &used);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("compressed_page_size"), std::string::npos) << s.message();

  PageHeader neg;
  neg.type = 0;
  neg.uncompressed_page_size = -1;
  neg.compressed_page_size = 4;
  neg.data_page = DataPageHeader{1, 0, 3, 3};
  const std::string b = testing::SerializePageHeader(neg);
  EXPECT_FALSE(
      ParsePageHeader(reinterpret_cast<const uint8_t*>(b.data()), b.size(), &h, &used).ok());
}

}  // namespace
}  // namespace storage::parquet
