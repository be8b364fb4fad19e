// The writer: files read back by our reader, and by an independent one (arrow-rs through
// parquet-wasm, testdata/read_parquet.mjs), every value compared with what went in. Several row
// groups and pages, both codecs, empty lists and strings, and the refusals of bad input.
#include "storage/parquet/writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "storage/parquet/columns.h"

namespace storage::parquet {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A table with every column type the writer has, and irregular values.
struct Table {
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<double> doubles;
  std::vector<std::string> strings;
  std::vector<float> vec;  // rows x kDim
  std::vector<float> ragged;
  std::vector<int64_t> ragged_offsets{0};
  std::vector<std::vector<std::string>> tags;
};
constexpr int64_t kDim = 26;

Table MakeTable(int64_t rows) {
  Table t;
  for (int64_t r = 0; r < rows; ++r) {
    t.ints.push_back(r * 1000003 - (int64_t{1} << 40));
    t.floats.push_back(static_cast<float>(r) / 7.0f - 3.25f);
    t.doubles.push_back(static_cast<double>(r) * 1e-3 + 1.0 / 3.0);
    t.strings.push_back(r % 5 == 0 ? "" : "row " + std::to_string(r) + " \xc3\xa9");
    for (int64_t k = 0; k < kDim; ++k) t.vec.push_back(static_cast<float>(r) + k / 64.0f - 0.5f);
    for (int64_t k = 0; k < r % 4; ++k) t.ragged.push_back(static_cast<float>(r * 10 + k));
    t.ragged_offsets.push_back(static_cast<int64_t>(t.ragged.size()));
    std::vector<std::string> tags;
    for (int64_t k = 0; k < r % 3; ++k) tags.push_back("t" + std::to_string(r) + "." + std::to_string(k));
    t.tags.push_back(tags);
  }
  return t;
}

TableWriter MakeWriter(const Table& t, const WriterOptions& options) {
  TableWriter w(options);
  w.AddInt64("index", t.ints);
  w.AddFloat("timestamp", t.floats);
  w.AddDouble("videos/observation.images.top/from_timestamp", t.doubles);
  w.AddString("task", t.strings);
  w.AddFloatList("observation.state", t.vec, FixedOffsets(static_cast<int64_t>(t.ints.size()), kDim));
  w.AddFloatList("ragged", t.ragged, t.ragged_offsets);
  w.AddStringList("tasks", t.tags);
  w.AddKeyValue("embody", "{\"x\": 1}");
  return w;
}

void ExpectOurReaderReads(const std::string& bytes, const Table& t, int row_groups) {
  auto file = ParquetFile::FromBuffer("written.parquet", bytes);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const ParquetFile& f = **file;
  EXPECT_EQ(f.num_rows(), static_cast<int64_t>(t.ints.size()));
  EXPECT_EQ(f.num_row_groups(), row_groups);
  ASSERT_EQ(f.metadata().key_value_metadata.size(), 1u);
  EXPECT_EQ(f.metadata().key_value_metadata[0].key, "embody");

  auto ints = ReadFlatColumn<int64_t>(f, "index");
  ASSERT_TRUE(ints.ok()) << ints.status().message();
  EXPECT_EQ(ints->values, t.ints);
  auto floats = ReadFlatColumn<float>(f, "timestamp");
  ASSERT_TRUE(floats.ok()) << floats.status().message();
  EXPECT_EQ(floats->values, t.floats);
  auto doubles = ReadFlatColumn<double>(f, "videos/observation.images.top/from_timestamp");
  ASSERT_TRUE(doubles.ok()) << doubles.status().message();
  EXPECT_EQ(doubles->values, t.doubles);
  auto strings = ReadFlatColumn<std::string>(f, "task");
  ASSERT_TRUE(strings.ok()) << strings.status().message();
  EXPECT_EQ(strings->values, t.strings);
  auto vec = ReadListColumn<float>(f, "observation.state");
  ASSERT_TRUE(vec.ok()) << vec.status().message();
  EXPECT_EQ(vec->values, t.vec);
  EXPECT_EQ(vec->FixedLength(), kDim);
  EXPECT_TRUE(vec->valid.empty());
  auto ragged = ReadListColumn<float>(f, "ragged");
  ASSERT_TRUE(ragged.ok()) << ragged.status().message();
  EXPECT_EQ(ragged->values, t.ragged);
  EXPECT_EQ(ragged->offsets, t.ragged_offsets);
  auto tags = ReadListColumn<std::string>(f, "tasks");
  ASSERT_TRUE(tags.ok()) << tags.status().message();
  ASSERT_EQ(tags->rows(), static_cast<int64_t>(t.tags.size()));
  for (size_t r = 0; r < t.tags.size(); ++r) {
    std::vector<std::string> row(tags->values.begin() + tags->offsets[r],
                                 tags->values.begin() + tags->offsets[r + 1]);
    EXPECT_EQ(row, t.tags[r]) << "row " << r;
  }
}

TEST(ParquetWriterTest, OurReaderReadsEveryColumnBack) {
  const Table t = MakeTable(1000);
  for (Codec codec : {Codec::kSnappy, Codec::kUncompressed}) {
    SCOPED_TRACE(CodecName(static_cast<int32_t>(codec)));
    // Small pages and row groups: 1000 rows become 3 row groups of many pages each.
    WriterOptions o{.codec = codec, .page_bytes = 2048, .row_group_rows = 400};
    auto bytes = MakeWriter(t, o).Finish();
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    ExpectOurReaderReads(*bytes, t, 3);
    auto file = ParquetFile::FromBuffer("w", *bytes);
    ASSERT_TRUE(file.ok());
    const auto& chunk = (*file)->metadata().row_groups[0].columns[4].meta_data;
    ASSERT_TRUE(chunk.has_value());
    EXPECT_EQ(chunk->path_in_schema, (std::vector<std::string>{"observation.state", "list",
                                                               "element"}));
    EXPECT_EQ(chunk->codec, static_cast<int32_t>(codec));
    // 400 rows x 26 floats at 2 KiB per page: many pages, each whole rows.
    EXPECT_GT(chunk->total_uncompressed_size, 400 * kDim * 4);
  }
  // Defaults: one row group, one page per column.
  auto bytes = MakeWriter(t, {}).Finish();
  ASSERT_TRUE(bytes.ok());
  ExpectOurReaderReads(*bytes, t, 1);
}

TEST(ParquetWriterTest, NoRowsIsAFileWithASchemaAndNoRowGroups) {
  TableWriter w;
  w.AddInt64("index", {});
  w.AddFloatList("action", {}, {0});
  auto bytes = w.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto file = ParquetFile::FromBuffer("empty", *bytes);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->num_rows(), 0);
  EXPECT_EQ((*file)->num_row_groups(), 0);
  EXPECT_TRUE((*file)->schema().FindColumn("action").ok());
}

TEST(ParquetWriterTest, RefusesTablesThatDoNotAddUp) {
  {
    TableWriter w;
    w.AddInt64("a", {1, 2, 3});
    w.AddFloat("b", {1, 2});
    auto r = w.Finish();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("column 'b' has 2 rows"), std::string::npos)
        << r.status().message();
  }
  {
    TableWriter w;
    w.AddFloatList("v", {1, 2, 3}, {0, 2, 1, 3});
    auto r = w.Finish();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("offsets decrease at row 1"), std::string::npos)
        << r.status().message();
  }
  {
    TableWriter w;
    w.AddFloatList("v", {1, 2, 3}, {0, 2});
    EXPECT_FALSE(w.Finish().ok());  // offsets end before the values
  }
  {
    TableWriter w;
    w.AddInt64("a", {1});
    w.AddInt64("a", {2});
    EXPECT_FALSE(w.Finish().ok());
  }
  EXPECT_FALSE(TableWriter().Finish().ok());
  {
    TableWriter w({.codec = Codec::kZstd});
    w.AddInt64("a", {1});
    EXPECT_FALSE(w.Finish().ok());
  }
}

// ---- the independent reader -----------------------------------------------------------------

const char kNodeReader[] = EMBODY_PARQUET_NODE_READER;
const char kGeneratedFiles[] = EMBODY_PARQUET_GENERATED;

TEST(ParquetWriterTest, ParquetWasmReadsEveryValue) {
  if (fs::exists(fs::path(kGeneratedFiles) / "UNAVAILABLE")) {
    GTEST_SKIP() << "parquet-wasm is not installed (see " << kGeneratedFiles << "/UNAVAILABLE)";
  }
  if (!fs::exists(kNodeReader)) GTEST_SKIP() << "build the target parquet_fixtures first";
  const Table t = MakeTable(777);
  const fs::path dir = fs::temp_directory_path() / ("parquet_writer_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (Codec codec : {Codec::kSnappy, Codec::kUncompressed}) {
    SCOPED_TRACE(CodecName(static_cast<int32_t>(codec)));
    const std::string path = (dir / "t.parquet").string();
    ASSERT_TRUE(MakeWriter(t, {.codec = codec, .page_bytes = 4096, .row_group_rows = 300})
                    .WriteFile(path)
                    .ok());
    const std::string cmd = "node '" + std::string(kNodeReader) + "' '" + path + "'";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    ASSERT_EQ(pclose(p), 0) << cmd;
    const json j = json::parse(out);
    ASSERT_EQ(j["num_rows"], 777);
    EXPECT_EQ(j["fields"]["index"], "Int64");
    EXPECT_EQ(j["fields"]["timestamp"], "Float32");
    EXPECT_EQ(j["fields"]["videos/observation.images.top/from_timestamp"], "Float64");
    EXPECT_EQ(j["fields"]["task"], "Utf8");
    EXPECT_EQ(j["fields"]["observation.state"], "List<Float32>");
    EXPECT_EQ(j["fields"]["tasks"], "List<Utf8>");
    EXPECT_EQ(j["metadata"]["embody"], "{\"x\": 1}");
    const json& c = j["columns"];
    for (size_t r = 0; r < t.ints.size(); ++r) {
      SCOPED_TRACE("row " + std::to_string(r));
      ASSERT_EQ(c["index"][r].get<int64_t>(), t.ints[r]);
      // A float32 arrives as the double that holds it: exactly equal or wrong.
      ASSERT_EQ(c["timestamp"][r].get<double>(), static_cast<double>(t.floats[r]));
      ASSERT_EQ(c["videos/observation.images.top/from_timestamp"][r].get<double>(), t.doubles[r]);
      ASSERT_EQ(c["task"][r].get<std::string>(), t.strings[r]);
      const json& v = c["observation.state"][r];
      ASSERT_EQ(v.size(), static_cast<size_t>(kDim));
      for (int64_t k = 0; k < kDim; ++k) {
        ASSERT_EQ(v[k].get<double>(), static_cast<double>(t.vec[r * kDim + k])) << "element " << k;
      }
      const json& rg = c["ragged"][r];
      ASSERT_EQ(static_cast<int64_t>(rg.size()), t.ragged_offsets[r + 1] - t.ragged_offsets[r]);
      for (size_t k = 0; k < rg.size(); ++k) {
        ASSERT_EQ(rg[k].get<double>(), t.ragged[t.ragged_offsets[r] + k]);
      }
      ASSERT_EQ(c["tasks"][r].get<std::vector<std::string>>(), t.tags[r]);
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace storage::parquet
