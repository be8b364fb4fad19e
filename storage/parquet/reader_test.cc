// The reader on files from the small test writer, for what the fixtures do not reach on
// purpose: definition levels kept implicit while a column has no nulls and written out when the
// first null comes (within a chunk and across row groups), pages larger than the read-ahead
// window, page headers longer than the first look at them, and the same file read from disk and
// from memory.
#include "storage/parquet/reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "storage/parquet/columns.h"
#include "storage/testing/parquet_writer.h"

namespace storage::parquet {
namespace {

namespace fs = std::filesystem;

std::vector<float> Values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 7.0f;
  return v;
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const fs::path p = fs::temp_directory_path() / ("parquet_reader_test_" + name + ".parquet");
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
  return p.string();
}

// Checks a LIST<float> of `dim` per row against `values`, rows with r % null_every ==
// null_every - 1 null.
void ExpectList(const ListColumn<float>& c, const std::vector<float>& values, int64_t rows, int dim,
                int64_t null_every) {
  ASSERT_EQ(c.rows(), rows);
  size_t next = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool null_row = null_every > 0 && r % null_every == null_every - 1;
    if (null_row) {
      ASSERT_FALSE(c.valid.empty());
      EXPECT_EQ(c.valid[static_cast<size_t>(r)], 0) << r;
      EXPECT_EQ(c.offsets[r + 1], c.offsets[r]) << r;
      continue;
    }
    if (!c.valid.empty()) {
      EXPECT_EQ(c.valid[static_cast<size_t>(r)], 1) << r;
    }
    ASSERT_EQ(c.offsets[r + 1] - c.offsets[r], dim) << r;
    for (int k = 0; k < dim; ++k) {
      ASSERT_EQ(c.values[next++], values[static_cast<size_t>(r * dim + k)]) << r;
    }
  }
  EXPECT_EQ(next, c.values.size());
}

TEST(ReaderTest, DenseListsKeepDefinitionLevelsImplicit) {
  const std::vector<float> values = Values(300 * 26);
  testing::SimpleFileOptions o;
  o.rows_per_page = 64;
  o.rows_per_row_group = 128;
  for (bool v2 : {false, true}) {
    o.page_v2 = v2;
    const std::string bytes =
        testing::WriteSimpleFile({{"state", PhysicalType::kFloat, 26, values.data()}}, 300, o);
    auto file = ParquetFile::FromBuffer("dense", bytes);
    ASSERT_TRUE(file.ok());
    auto chunk = (*file)->ReadColumn("state", 1);
    ASSERT_TRUE(chunk.ok()) << chunk.status().ToString();
    EXPECT_EQ(chunk->num_levels, 128 * 26);
    EXPECT_TRUE(chunk->def_levels.empty());
    EXPECT_TRUE(chunk->rep_levels.empty());
    ASSERT_EQ(chunk->row_starts.size(), 128u);
    EXPECT_EQ(chunk->row_starts[1], 26);
    auto column = ReadListColumn<float>(**file, "state");
    ASSERT_TRUE(column.ok()) << column.status().ToString();
    EXPECT_TRUE(column->valid.empty());
    ExpectList(*column, values, 300, 26, 0);
  }
}

TEST(ReaderTest, TheFirstNullWritesOutTheImplicitLevelsWithinAChunkAndAcrossRowGroups) {
  const std::vector<float> values = Values(400 * 4);
  testing::SimpleFileOptions o;
  o.rows_per_page = 50;
  o.rows_per_row_group = 200;
  // The first null is row 149: page 3 of row group 0. And row group 1 starts dense again (its
  // first null is row 299) after row group 0 made the levels explicit.
  for (bool v2 : {false, true}) {
    o.page_v2 = v2;
    testing::SimpleColumn c{"action", PhysicalType::kFloat, 4, values.data()};
    c.null_every = 150;
    const std::string bytes = testing::WriteSimpleFile({c}, 400, o);
    auto file = ParquetFile::FromBuffer("nulls", bytes);
    ASSERT_TRUE(file.ok());
    auto column = ReadListColumn<float>(**file, "action");
    ASSERT_TRUE(column.ok()) << column.status().ToString();
    ExpectList(*column, values, 400, 4, 150);
    auto group0 = (*file)->ReadColumn("action", 0);
    ASSERT_TRUE(group0.ok());
    EXPECT_EQ(group0->def_levels.size(), static_cast<size_t>(group0->num_levels));
    EXPECT_EQ(group0->def_levels[0], 3);
  }
  // A dense first row group and nulls only in the second: the levels of the whole first group
  // are written out when the second group's first page with a null arrives.
  testing::SimpleColumn late{"action", PhysicalType::kFloat, 4, values.data()};
  late.null_every = 390;
  o.page_v2 = false;
  auto file = ParquetFile::FromBuffer("late", testing::WriteSimpleFile({late}, 400, o));
  ASSERT_TRUE(file.ok());
  auto column = ReadListColumn<float>(**file, "action");
  ASSERT_TRUE(column.ok()) << column.status().ToString();
  ExpectList(*column, values, 400, 4, 390);
}

TEST(ReaderTest, PagesLargerThanTheReadAheadWindowFromDiskAndMemory) {
  // One page of 3 Mi floats (12 MiB) per row group: past the 4 MiB window.
  const size_t n = size_t{3} << 20;
  const std::vector<float> values = Values(n);
  for (int32_t codec : {0, 1}) {
    testing::SimpleFileOptions o;
    o.codec = codec;
    o.rows_per_page = static_cast<int64_t>(n);
    o.rows_per_row_group = static_cast<int64_t>(n / 2);
    const std::string bytes = testing::WriteSimpleFile(
        {{"v", PhysicalType::kFloat, 0, values.data()}}, static_cast<int64_t>(n), o);
    const std::string path = WriteTemp("large", bytes);
    auto from_disk = ParquetFile::Open(path);
    ASSERT_TRUE(from_disk.ok()) << from_disk.status().ToString();
    auto a = ReadFlatColumn<float>(**from_disk, "v");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->values, values);
    auto from_memory = ParquetFile::FromBuffer("large", bytes);
    ASSERT_TRUE(from_memory.ok());
    auto b = ReadFlatColumn<float>(**from_memory, "v");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->values, values);
    fs::remove(path);
  }
}

TEST(ReaderTest, PageHeadersLongerThanTheFirstLook) {
  // An unknown 200 KB field in the page header (a writer's statistics could be that large).
  const std::vector<float> values = Values(1000);
  testing::SimpleFileOptions o;
  o.rows_per_page = 1000;
  const std::string file =
      testing::WriteSimpleFile({{"v", PhysicalType::kFloat, 0, values.data()}}, 1000, o);
  PageHeader h;
  size_t used = 0;
  ASSERT_TRUE(
      ParsePageHeader(reinterpret_cast<const uint8_t*>(file.data() + 4), file.size() - 4, &h, &used)
          .ok());
  std::string header = testing::SerializePageHeader(h);
  header.pop_back();  // the stop byte
  testing::CompactWriter extra;
  extra.StructBegin();
  extra.FieldHeader(3, ThriftType::kI32);  // sets the delta base (3, the last field written)
  const size_t skip = extra.bytes().size();
  extra.Binary(20, std::string(200000, 'x'));
  extra.StructEnd();
  header += extra.bytes().substr(skip);
  // Rebuild the file with the longer header: data page offset stays 4, sizes grow.
  uint32_t footer_len;
  std::memcpy(&footer_len, file.data() + file.size() - 8, 4);
  FileMetaData meta;
  ASSERT_TRUE(ParseFileMetaData(
                  reinterpret_cast<const uint8_t*>(file.data() + file.size() - 8 - footer_len),
                  footer_len, &meta)
                  .ok());
  const std::string body = file.substr(4 + used, static_cast<size_t>(h.compressed_page_size));
  meta.row_groups[0].columns[0].meta_data->total_compressed_size =
      static_cast<int64_t>(header.size() + body.size());
  const std::string footer = testing::SerializeFileMetaData(meta);
  const uint32_t len = static_cast<uint32_t>(footer.size());
  const std::string rebuilt = "PAR1" + header + body + footer +
                              std::string(reinterpret_cast<const char*>(&len), 4) + "PAR1";
  const std::string path = WriteTemp("long_header", rebuilt);
  auto f = ParquetFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto c = ReadFlatColumn<float>(**f, "v");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->values, values);
  fs::remove(path);
}

TEST(ReaderTest, EveryCodecAndPageVersionOfTheTestWriter) {
  const std::vector<float> values = Values(500 * 3);
  for (int32_t codec : {0, 1, 2, 6}) {
    for (bool v2 : {false, true}) {
      testing::SimpleFileOptions o;
      o.codec = codec;
      o.page_v2 = v2;
      o.rows_per_page = 77;
      o.rows_per_row_group = 230;
      testing::SimpleColumn c{"l", PhysicalType::kFloat, 3, values.data()};
      c.null_every = 41;
      auto file = ParquetFile::FromBuffer("codecs", testing::WriteSimpleFile({c}, 500, o));
      ASSERT_TRUE(file.ok());
      auto column = ReadListColumn<float>(**file, "l");
      ASSERT_TRUE(column.ok()) << codec << " " << v2 << ": " << column.status().ToString();
      ExpectList(*column, values, 500, 3, 41);
    }
  }
}

}  // namespace
}  // namespace storage::parquet
