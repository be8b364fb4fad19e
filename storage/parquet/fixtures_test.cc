// The reader against files from an independent writer (Apache arrow-rs through parquet-wasm,
// storage/parquet/testdata/gen_fixtures.mjs): every column of every fixture is read and
// compared exactly with the values the generator wrote (expected.json). The fixtures cover
// every codec, data pages v1 and v2, dictionary and plain, the delta encodings and byte stream
// split, nulls, strings, lists of every common shape, several row groups and pages, and LeRobot
// frames and v3 metadata.
//
// Two sets: a few small files committed in testdata/ (always run), and the full set written at
// build time (skipped, with the reason, where node, npm or the registry were missing).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "storage/parquet/columns.h"

namespace storage::parquet {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char kCommitted[] = EMBODY_PARQUET_TESTDATA;
const char kGenerated[] = EMBODY_PARQUET_GENERATED;

json LoadJson(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

// One leaf slot as the generator writes it: int64 as a decimal string, float32 widened.
json Leaf(const NestedColumn& n, int64_t i) {
  if (!n.valid.empty() && !n.valid[static_cast<size_t>(i)]) return nullptr;
  const ColumnValues& v = n.values;
  switch (v.type) {
    case PhysicalType::kBoolean:
      return v.bools[i] != 0;
    case PhysicalType::kInt32:
      return v.i32[i];
    case PhysicalType::kInt64:
      return std::to_string(v.i64[i]);
    case PhysicalType::kFloat:
      return static_cast<double>(v.f32[i]);
    case PhysicalType::kDouble:
      return v.f64[i];
    default:
      return std::string(v.View(i));
  }
}

json List(const NestedColumn& n, size_t level, int64_t k) {
  if (level == n.lists.size()) return Leaf(n, k);
  const ListLevel& l = n.lists[level];
  if (!l.valid.empty() && !l.valid[static_cast<size_t>(k)]) return nullptr;
  json out = json::array();
  for (int64_t c = l.offsets[k]; c < l.offsets[k + 1]; ++c) out.push_back(List(n, level + 1, c));
  return out;
}

json Rows(const NestedColumn& n) {
  json rows = json::array();
  for (int64_t r = 0; r < n.num_rows; ++r) rows.push_back(List(n, 0, r));
  return rows;
}

// Reads every column named in `expected` and compares it row by row.
void CheckFile(const fs::path& path, const json& expected) {
  SCOPED_TRACE(path.string());
  auto file = ParquetFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->num_rows(), expected["num_rows"].get<int64_t>());
  for (const auto& [name, values] : expected["columns"].items()) {
    auto column = ReadNestedColumn(**file, name);
    ASSERT_TRUE(column.ok()) << column.status().ToString();
    const json got = Rows(*column);
    ASSERT_EQ(got.size(), values.size()) << name;
    for (size_t r = 0; r < values.size(); ++r) {
      ASSERT_EQ(got[r], values[r]) << name << " row " << r;
    }
    // Row group by row group gives the same rows in order.
    size_t row = 0;
    for (int g = 0; g < (*file)->num_row_groups(); ++g) {
      auto part = ReadNestedColumn(**file, name, g);
      ASSERT_TRUE(part.ok()) << part.status().ToString();
      EXPECT_EQ(part->num_rows, (*file)->row_group_rows(g));
      const json rows = Rows(*part);
      for (size_t r = 0; r < rows.size(); ++r) ASSERT_EQ(rows[r], values[row + r]) << name;
      row += rows.size();
    }
    EXPECT_EQ(row, values.size()) << name;
  }
}

// Runs CheckFile over every fixture in `dir`; returns how many.
int CheckDirectory(const fs::path& dir) {
  const json expected = LoadJson(dir / "expected.json");
  int checked = 0;
  for (const auto& [name, spec] : expected.items()) {
    CheckFile(dir / (name + ".parquet"), spec);
    ++checked;
  }
  return checked;
}

TEST(ParquetFixturesTest, CommittedFixturesMatchTheWriterValues) {
  EXPECT_GE(CheckDirectory(kCommitted), 8);
}

TEST(ParquetFixturesTest, GeneratedFixturesMatchTheWriterValues) {
  const fs::path dir = kGenerated;
  if (fs::exists(dir / "UNAVAILABLE")) {
    std::ifstream in(dir / "UNAVAILABLE");
    std::string reason;
    std::getline(in, reason);
    GTEST_SKIP() << "fixtures from parquet-wasm were not generated: " << reason;
  }
  if (!fs::exists(dir / "expected.json")) {
    GTEST_SKIP() << "fixtures from parquet-wasm were not generated (build the target "
                    "parquet_fixtures): "
                 << dir;
  }
  // 16 codec/page/dictionary variants, 4 encoding files, 3 LeRobot files.
  EXPECT_GE(CheckDirectory(dir), 23);
}

fs::path Committed(const std::string& name) { return fs::path(kCommitted) / (name + ".parquet"); }

TEST(ParquetFixturesTest, LeRobotFramesAsTypedColumns) {
  const json expected = LoadJson(fs::path(kCommitted) / "expected.json")["lerobot_frames"];
  auto file = ParquetFile::Open(Committed("lerobot_frames").string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const int64_t rows = (*file)->num_rows();
  for (const char* name : {"observation.state", "action"}) {
    auto c = ReadListColumn<float>(**file, name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->rows(), rows);
    EXPECT_EQ(c->FixedLength(), 26);
    ASSERT_EQ(c->values.size(), static_cast<size_t>(rows * 26));
    EXPECT_TRUE(c->valid.empty());
    EXPECT_TRUE(c->value_valid.empty());
    for (int64_t r = 0; r < rows; ++r) {
      for (int k = 0; k < 26; ++k) {
        ASSERT_EQ(c->values[r * 26 + k], expected["columns"][name][r][k].get<float>()) << name;
      }
    }
  }
  auto t = ReadFlatColumn<float>(**file, "timestamp");
  ASSERT_TRUE(t.ok());
  auto frame = ReadFlatColumn<int64_t>(**file, "frame_index");
  auto index = ReadFlatColumn<int64_t>(**file, "index");
  ASSERT_TRUE(frame.ok() && index.ok());
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(t->values[r], expected["columns"]["timestamp"][r].get<float>());
    EXPECT_EQ(std::to_string(frame->values[r]),
              expected["columns"]["frame_index"][r].get<std::string>());
    EXPECT_EQ(index->values[r], r);
  }
  // A timestamp column read as double widens exactly.
  auto td = ReadFlatColumn<double>(**file, "timestamp");
  ASSERT_TRUE(td.ok());
  EXPECT_EQ(td->values[5], static_cast<double>(t->values[5]));
}

TEST(ParquetFixturesTest, LeRobotV3MetadataAsTypedAndNestedColumns) {
  auto tasks = ParquetFile::Open(Committed("lerobot_tasks").string());
  ASSERT_TRUE(tasks.ok());
  auto text = ReadFlatColumn<std::string>(**tasks, "__index_level_0__");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->values,
            (std::vector<std::string>{"put the cube in the bowl", "open the drawer"}));

  auto episodes = ParquetFile::Open(Committed("lerobot_episodes").string());
  ASSERT_TRUE(episodes.ok());
  auto list = ReadListColumn<std::string>(**episodes, "tasks");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->offsets, (std::vector<int64_t>{0, 2, 3, 5}));
  EXPECT_EQ(list->values[2], "open the drawer");
  auto from = ReadFlatColumn<double>(**episodes, "videos/observation.images.top/from_timestamp");
  ASSERT_TRUE(from.ok()) << from.status().ToString();
  EXPECT_EQ(from->values.size(), 3u);
  auto to = ReadFlatColumn<int64_t>(**episodes, "dataset_to_index");
  ASSERT_TRUE(to.ok());
  EXPECT_EQ(to->values.back(), 50 + 60 + 40);
  auto mins = ReadListColumn<double>(**episodes, "stats/observation.state/min");
  ASSERT_TRUE(mins.ok());
  EXPECT_EQ(mins->FixedLength(), 26);
  auto mean = ReadNestedColumn(**episodes, "stats/observation.images.top/mean");
  ASSERT_TRUE(mean.ok());
  ASSERT_EQ(mean->lists.size(), 3u);  // (3, 1, 1) per episode
  EXPECT_EQ(mean->lists[0].offsets, (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(mean->FixedListLength(), 1);
}

TEST(ParquetFixturesTest, TypedReadsOfNullableColumnsAndRowGroups) {
  auto file = ParquetFile::Open(Committed("types_snappy_v1_dict").string());
  ASSERT_TRUE(file.ok());
  ASSERT_EQ((*file)->num_row_groups(), 3);
  auto i32 = ReadFlatColumn<int32_t>(**file, "i32");
  ASSERT_TRUE(i32.ok());
  ASSERT_EQ(i32->valid.size(), 40u);
  EXPECT_EQ(i32->valid[6], 0);  // every 7th row is null
  EXPECT_EQ(i32->values[6], 0);
  EXPECT_EQ(i32->values[2], INT32_MIN);
  auto b = ReadFlatColumn<bool>(**file, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->valid[2], 0);
  auto group = ReadFlatColumn<int64_t>(**file, "i64", 1);
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->values.size(), static_cast<size_t>((*file)->row_group_rows(1)));
  EXPECT_EQ(group->values[0], 16 * 1000003 - 500000000);
  auto vl = ReadListColumn<float>(**file, "vl");
  ASSERT_TRUE(vl.ok());
  EXPECT_EQ(vl->valid[8], 0);  // every 9th list is null
  EXPECT_FALSE(vl->value_valid.empty());
  EXPECT_EQ(vl->FixedLength(), -1);
  auto fsl = ReadListColumn<float>(**file, "fsl");
  ASSERT_TRUE(fsl.ok());
  EXPECT_EQ(fsl->offsets[1], 3);
}

TEST(ParquetFixturesTest, WrongShapesAndTypesAreErrorsNamingTheColumn) {
  auto file = ParquetFile::Open(Committed("types_zstd_v2_plain").string());
  ASSERT_TRUE(file.ok());
  auto as_float = ReadFlatColumn<float>(**file, "i64");
  ASSERT_FALSE(as_float.ok());
  EXPECT_NE(as_float.status().message().find("column 'i64'"), std::string::npos)
      << as_float.status().message();
  EXPECT_NE(as_float.status().message().find("INT64 column cannot be read as float"),
            std::string::npos);
  EXPECT_EQ(as_float.status().field(), "i64");
  auto flat_list = ReadFlatColumn<float>(**file, "vl");
  ASSERT_FALSE(flat_list.ok());
  EXPECT_NE(flat_list.status().message().find("vl.list.item"), std::string::npos);
  EXPECT_FALSE(ReadListColumn<float>(**file, "f32").ok());
  EXPECT_FALSE(ReadListColumn<std::string>(**file, "lls").ok());
  EXPECT_EQ(ReadFlatColumn<float>(**file, "missing").status().code(), common::Code::kNotFound);
  EXPECT_FALSE(ReadFlatColumn<int64_t>(**file, "i64", 7).ok());
}

}  // namespace
}  // namespace storage::parquet
