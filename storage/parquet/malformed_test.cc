// Malformed files must give errors, never crashes or unbounded allocations: files that are not
// Parquet, truncated footers, footers and page headers whose lengths and counts lie, schemas
// nested past the limit, and random corruption of real files. Errors name the file, the column,
// the row group and the page.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>

#include "storage/parquet/columns.h"
#include "storage/testing/parquet_writer.h"

namespace storage::parquet {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string LE32(uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  return std::string(b, 4);
}

common::Status OpenStatus(const std::string& bytes, const ReaderOptions& options = {}) {
  return ParquetFile::FromBuffer("bad.parquet", bytes, options).status();
}

// Opens `bytes` and reads every column of every row group; the first error, or OK.
common::Status ReadEverything(const std::string& bytes, const ReaderOptions& options = {}) {
  auto file = ParquetFile::FromBuffer("bad.parquet", bytes, options);
  if (!file.ok()) return file.status();
  for (const ColumnDescriptor& c : (*file)->schema().columns()) {
    auto column = ReadNestedColumn(**file, c.DottedPath());
    if (!column.ok()) return column.status();
  }
  return common::Status::Ok();
}

// A valid file of one float column: 100 rows of 4 floats as a LIST, one row group, one page.
std::string ListFile(int32_t codec = 1) {
  static std::vector<float> values = [] {
    std::vector<float> v(400);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
    return v;
  }();
  testing::SimpleColumn c{"action", PhysicalType::kFloat, 4, values.data()};
  testing::SimpleFileOptions o;
  o.codec = codec;
  o.rows_per_page = 1000;
  return testing::WriteSimpleFile({c}, 100, o);
}

// Rebuilds a one-chunk, one-page file with its footer and first page header changed.
std::string Rebuild(const std::string& file, const std::function<void(FileMetaData&)>& meta_edit,
                    const std::function<void(PageHeader&)>& page_edit = nullptr) {
  uint32_t footer_len;
  std::memcpy(&footer_len, file.data() + file.size() - 8, 4);
  const size_t footer_start = file.size() - 8 - footer_len;
  FileMetaData meta;
  EXPECT_TRUE(ParseFileMetaData(reinterpret_cast<const uint8_t*>(file.data() + footer_start),
                                footer_len, &meta)
                  .ok());
  std::string chunk = file.substr(4, footer_start - 4);
  if (page_edit) {
    PageHeader h;
    size_t used = 0;
    EXPECT_TRUE(
        ParsePageHeader(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size(), &h, &used)
            .ok());
    page_edit(h);
    chunk = testing::SerializePageHeader(h) + chunk.substr(used);
    meta.row_groups[0].columns[0].meta_data->total_compressed_size =
        static_cast<int64_t>(chunk.size());
  }
  meta_edit(meta);
  const std::string footer = testing::SerializeFileMetaData(meta);
  return "PAR1" + chunk + footer + LE32(static_cast<uint32_t>(footer.size())) + "PAR1";
}

ColumnMetaData& Chunk(FileMetaData& m) { return *m.row_groups[0].columns[0].meta_data; }

TEST(MalformedTest, TheUnchangedTestFileReads) {
  const std::string file = ListFile();
  EXPECT_TRUE(ReadEverything(file).ok()) << ReadEverything(file).ToString();
  EXPECT_TRUE(ReadEverything(Rebuild(
                                 file, [](FileMetaData&) {}, [](PageHeader&) {}))
                  .ok());
}

TEST(MalformedTest, NotParquetAtAll) {
  EXPECT_FALSE(OpenStatus("").ok());
  EXPECT_FALSE(OpenStatus("PAR1PAR1").ok());
  common::Status s = OpenStatus("not a parquet file at all, but long enough");
  EXPECT_NE(s.message().find("bad.parquet: not a Parquet file"), std::string::npos) << s.message();
  std::string head_only = ListFile();
  head_only.replace(0, 4, "PAR0");
  EXPECT_FALSE(OpenStatus(head_only).ok());
  std::string encrypted = ListFile();
  encrypted.replace(encrypted.size() - 4, 4, "PARE");
  EXPECT_EQ(OpenStatus(encrypted).code(), common::Code::kUnimplemented);
}

TEST(MalformedTest, FooterLengthsThatLie) {
  const std::string good = ListFile();
  std::string longer = good;
  longer.replace(longer.size() - 8, 4, LE32(static_cast<uint32_t>(good.size())));
  common::Status s = OpenStatus(longer);
  EXPECT_NE(s.message().find("larger than the file"), std::string::npos) << s.message();
  std::string max = good;
  max.replace(max.size() - 8, 4, LE32(0xffffffffu));
  EXPECT_FALSE(OpenStatus(max).ok());
  std::string shorter = good;
  shorter.replace(shorter.size() - 8, 4, LE32(10));
  EXPECT_FALSE(OpenStatus(shorter).ok());
  ReaderOptions small;
  small.max_metadata_bytes = 16;
  EXPECT_EQ(OpenStatus(good, small).code(), common::Code::kResourceExhausted);
}

TEST(MalformedTest, EveryTruncationIsAnError) {
  const std::string good = ListFile();
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ReadEverything(good.substr(0, n)).ok()) << n;
  }
  // Truncated, then given its tail back: the footer is found but the chunk lies past its data.
  const std::string tail = good.substr(good.size() - 8);
  std::string cut = good.substr(0, good.size() - 8);
  const std::string footer_only = "PAR1" + cut.substr(cut.size() - 200) + tail;
  EXPECT_FALSE(ReadEverything(footer_only).ok());
}

TEST(MalformedTest, ColumnChunkOutsideTheFile) {
  const std::string file = ListFile();
  common::Status s = ReadEverything(
      Rebuild(file, [](FileMetaData& m) { Chunk(m).total_compressed_size = int64_t{1} << 40; }));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside the file's data"), std::string::npos) << s.message();
  EXPECT_FALSE(
      ReadEverything(Rebuild(file, [](FileMetaData& m) { Chunk(m).data_page_offset = 2; })).ok());
  EXPECT_FALSE(ReadEverything(Rebuild(file, [](FileMetaData& m) {
                 Chunk(m).total_compressed_size = -1;
               })).ok());
  ReaderOptions small;
  small.max_column_chunk_bytes = 64;
  EXPECT_EQ(ReadEverything(file, small).code(), common::Code::kResourceExhausted);
}

TEST(MalformedTest, HugeCountsAreRefusedBeforeAllocation) {
  const std::string file = ListFile();
  // A chunk that claims 2^40 values, and one just past the bound.
  common::Status s = ReadEverything(
      Rebuild(file, [](FileMetaData& m) { Chunk(m).num_values = int64_t{1} << 40; }));
  EXPECT_EQ(s.code(), common::Code::kResourceExhausted) << s.ToString();
  // A page that claims more values than the chunk.
  s = ReadEverything(Rebuild(
      file, [](FileMetaData&) {}, [](PageHeader& h) { h.data_page->num_values = INT32_MAX; }));
  EXPECT_NE(s.message().find("passes the chunk's"), std::string::npos) << s.message();
  // A chunk and page that agree on 2^30 values the page cannot hold.
  s = ReadEverything(Rebuild(
      file, [](FileMetaData& m) { Chunk(m).num_values = int64_t{1} << 30; },
      [](PageHeader& h) { h.data_page->num_values = 1 << 30; }));
  EXPECT_FALSE(s.ok());
  ReaderOptions small;
  small.max_decoded_bytes = 1 << 20;
  s = ReadEverything(Rebuild(
                         file, [](FileMetaData& m) { Chunk(m).num_values = int64_t{1} << 30; },
                         [](PageHeader& h) { h.data_page->num_values = 1 << 30; }),
                     small);
  EXPECT_EQ(s.code(), common::Code::kResourceExhausted) << s.ToString();
}

TEST(MalformedTest, ARunOfABillionRowStartsIsBoundedAsItIsDecoded) {
  // A v2 page of 2^29 entries in a dozen bytes: every entry a row start (a run of zeros) and
  // an element (definition levels all 3), and no values. The row starts count against the
  // decoded-bytes bound while they are found, before the missing values are noticed.
  const int64_t n = int64_t{1} << 29;
  testing::CompactWriter rep, def;
  rep.Varint(static_cast<uint64_t>(n) << 1);
  rep.Byte(0);
  def.Varint(static_cast<uint64_t>(n) << 1);
  def.Byte(3);
  const std::string levels = rep.bytes() + def.bytes();
  PageHeader h;
  h.type = static_cast<int32_t>(PageType::kDataPageV2);
  h.uncompressed_page_size = h.compressed_page_size = static_cast<int32_t>(levels.size());
  DataPageHeaderV2 v2;
  v2.num_values = v2.num_rows = static_cast<int32_t>(n);
  v2.repetition_levels_byte_length = static_cast<int32_t>(rep.bytes().size());
  v2.definition_levels_byte_length = static_cast<int32_t>(def.bytes().size());
  v2.is_compressed = false;
  h.data_page_v2 = v2;
  const std::string chunk = testing::SerializePageHeader(h) + levels;
  const std::string file = ListFile();
  uint32_t footer_len;
  std::memcpy(&footer_len, file.data() + file.size() - 8, 4);
  FileMetaData meta;
  ASSERT_TRUE(ParseFileMetaData(
                  reinterpret_cast<const uint8_t*>(file.data() + file.size() - 8 - footer_len),
                  footer_len, &meta)
                  .ok());
  Chunk(meta).num_values = n;
  Chunk(meta).codec = 0;
  Chunk(meta).total_compressed_size = static_cast<int64_t>(chunk.size());
  const std::string footer = testing::SerializeFileMetaData(meta);
  const std::string bad =
      "PAR1" + chunk + footer + LE32(static_cast<uint32_t>(footer.size())) + "PAR1";
  // 1 GiB passes the page's definition levels (a byte each, 512 MiB) but not its row starts
  // (eight bytes each, 4 GiB); 64 MiB stops the page at its levels already.
  ReaderOptions bound;
  bound.max_decoded_bytes = int64_t{1} << 30;
  common::Status s = ReadEverything(bad, bound);
  EXPECT_EQ(s.code(), common::Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("row starts"), std::string::npos) << s.message();
  bound.max_decoded_bytes = 64 << 20;
  s = ReadEverything(bad, bound);
  EXPECT_EQ(s.code(), common::Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("levels pass"), std::string::npos) << s.message();
}

TEST(MalformedTest, PageSizesThatLie) {
  const std::string file = ListFile();
  common::Status s = ReadEverything(Rebuild(
      file, [](FileMetaData&) {}, [](PageHeader& h) { h.compressed_page_size += 1000; }));
  EXPECT_NE(s.message().find("runs past the column chunk's end"), std::string::npos) << s.message();
  s = ReadEverything(Rebuild(
      file, [](FileMetaData&) {}, [](PageHeader& h) { h.uncompressed_page_size += 1; }));
  EXPECT_NE(s.message().find("decompresses to"), std::string::npos) << s.message();
  ReaderOptions small;
  small.max_page_bytes = 100;
  s = ReadEverything(file, small);
  EXPECT_EQ(s.code(), common::Code::kResourceExhausted);
  s = ReadEverything(Rebuild(
      file, [](FileMetaData&) {}, [](PageHeader& h) { h.uncompressed_page_size = INT32_MAX; }));
  EXPECT_EQ(s.code(), common::Code::kResourceExhausted) << s.ToString();
}

TEST(MalformedTest, ErrorsNameTheFileColumnRowGroupAndPage) {
  const std::string file = ListFile();
  common::Status s = ReadEverything(Rebuild(
      file, [](FileMetaData&) {}, [](PageHeader& h) { h.uncompressed_page_size -= 3; }));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("bad.parquet: column 'action.list.element', row group 0: page 0 "
                              "(byte 0 of the chunk): SNAPPY page",
                              0),
            0u)
      << s.message();
  EXPECT_EQ(s.field(), "action.list.element");
}

TEST(MalformedTest, UnsupportedFeaturesAreNamed) {
  const std::string file = ListFile();
  common::Status s = ReadEverything(Rebuild(file, [](FileMetaData& m) { Chunk(m).codec = 4; }));
  EXPECT_EQ(s.code(), common::Code::kUnimplemented);
  EXPECT_NE(s.message().find("BROTLI"), std::string::npos) << s.message();
  s = ReadEverything(Rebuild(
      file, [](FileMetaData&) {}, [](PageHeader& h) { h.data_page->encoding = 10; }));
  EXPECT_EQ(s.code(), common::Code::kUnimplemented);
  EXPECT_NE(s.message().find("ALP"), std::string::npos) << s.message();
  s = ReadEverything(Rebuild(
      file, [](FileMetaData& m) { m.row_groups[0].columns[0].file_path = "other.parquet"; }));
  EXPECT_EQ(s.code(), common::Code::kUnimplemented);
}

TEST(MalformedTest, MetadataThatContradictsItself) {
  const std::string file = ListFile();
  EXPECT_FALSE(ReadEverything(Rebuild(file, [](FileMetaData& m) {
                 Chunk(m).type = PhysicalType::kDouble;
               })).ok());
  EXPECT_FALSE(ReadEverything(Rebuild(file, [](FileMetaData& m) {
                 Chunk(m).path_in_schema = {"other"};
               })).ok());
  EXPECT_FALSE(ReadEverything(Rebuild(file, [](FileMetaData& m) {
                 m.row_groups[0].columns.push_back(m.row_groups[0].columns[0]);
               })).ok());
  EXPECT_FALSE(ReadEverything(Rebuild(file, [](FileMetaData& m) {
                 Chunk(m).num_values = 399;  // the page holds 400
               })).ok());
  EXPECT_FALSE(
      ReadEverything(Rebuild(file, [](FileMetaData& m) { Chunk(m).num_values = 401; })).ok());
  EXPECT_FALSE(ReadEverything(Rebuild(file, [](FileMetaData& m) {
                 m.row_groups[0].columns[0].meta_data.reset();
               })).ok());
}

TEST(MalformedTest, DeepSchemaNestingIsRefused) {
  const std::string file = ListFile();
  for (int depth : {40, 300, 5000}) {
    common::Status s = OpenStatus(Rebuild(file, [depth](FileMetaData& m) {
      m.schema.resize(1);
      m.schema[0].num_children = 1;
      for (int i = 0; i < depth; ++i) {
        SchemaElement g;
        g.name = "g";
        g.repetition = Repetition::kOptional;
        g.num_children = 1;
        m.schema.push_back(g);
      }
      SchemaElement leaf;
      leaf.name = "x";
      leaf.type = PhysicalType::kFloat;
      leaf.repetition = Repetition::kOptional;
      m.schema.push_back(leaf);
    }));
    ASSERT_FALSE(s.ok()) << depth;
    EXPECT_NE(s.message().find("deeper than"), std::string::npos) << s.message();
  }
}

TEST(MalformedTest, ThriftListsClaimingMoreElementsThanBytes) {
  // A footer whose schema list claims 2^31 elements.
  testing::CompactWriter w;
  w.StructBegin();
  w.I32(1, 1);
  w.ListBegin(2, ThriftType::kStruct, 0x7fffffff);
  const std::string footer = w.bytes();
  const std::string file = "PAR1" + footer + LE32(static_cast<uint32_t>(footer.size())) + "PAR1";
  common::Status s = OpenStatus(file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("file metadata: thrift: list of 2147483647 elements"),
            std::string::npos)
      << s.message();
}

// Flips bytes of real files (every page type, codec and encoding the fixtures have) and reads
// everything back under small bounds: each outcome must be an error or a success, never a crash.
TEST(MalformedTest, RandomCorruptionsOfFixturesNeverCrash) {
  ReaderOptions small;
  small.max_column_values = 1 << 20;
  small.max_decoded_bytes = 64 << 20;
  small.max_page_bytes = 16 << 20;
  std::mt19937 rng(5);
  int errors = 0, runs = 0;
  for (const char* name : {"types_snappy_v1_dict", "types_zstd_v2_plain", "types_gzip_v1_plain",
                           "types_uncompressed_v2_dict", "encodings_snappy_v2", "lerobot_frames",
                           "lerobot_episodes"}) {
    const std::string good =
        ReadAll(fs::path(EMBODY_PARQUET_TESTDATA) / (std::string(name) + ".parquet"));
    ASSERT_FALSE(good.empty()) << name;
    for (int i = 0; i < 150; ++i) {
      std::string bad = good;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        bad[rng() % bad.size()] = static_cast<char>(rng());
      }
      errors += !ReadEverything(bad, small).ok();
      ++runs;
    }
  }
  // Most flips land in compressed data or values and are caught; none may crash.
  EXPECT_GT(errors, runs / 10);
}

}  // namespace
}  // namespace storage::parquet
