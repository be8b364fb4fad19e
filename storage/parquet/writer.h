// A Parquet writer for the tables robot datasets hand to other tools: LeRobot's frame, episode
// and task files. Columns are given whole, in memory, and written as one file:
//
//   int64, float32, float64   required flat columns, PLAIN
//   string                    required BYTE_ARRAY annotated UTF8 / STRING, PLAIN
//   list<float32>, list<string>
//                             the three-level LIST form Arrow writes ("name.list.element", the
//                             list and its elements optional), PLAIN values with RLE/bit-packed
//                             definition and repetition levels
//
// Data pages are v1, uncompressed or Snappy (what pyarrow writes by default); a page holds whole
// rows, about `page_bytes` of values. No dictionaries, statistics or page indexes: readers do
// not need them. Parquet has no fixed-size list, so a fixed-length vector (LeRobot's `action`)
// is a list<float32> whose rows all have the same length, as Arrow stores a fixed_size_list.
//
// Not thread-safe; one writer makes one file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/parquet/metadata.h"

namespace storage::parquet {

struct WriterOptions {
  Codec codec = Codec::kSnappy;  // kSnappy or kUncompressed
  int64_t page_bytes = 1 << 20;  // values per data page, before compression
  int64_t row_group_rows = 1 << 20;
  std::string created_by = "embody parquet writer";
};

class TableWriter {
 public:
  explicit TableWriter(WriterOptions options = {}) : options_(std::move(options)) {}

  // Columns in file order; each must have the same number of rows (checked by Finish).
  void AddInt64(std::string name, const std::vector<int64_t>& values);
  void AddFloat(std::string name, const std::vector<float>& values);
  void AddDouble(std::string name, const std::vector<double>& values);
  void AddString(std::string name, std::vector<std::string> values);
  // Row i is values[offsets[i], offsets[i + 1]); offsets has rows + 1 entries, from 0 to
  // values.size(). FixedOffsets(rows, n) for rows of n each.
  void AddFloatList(std::string name, const std::vector<float>& values,
                    std::vector<int64_t> offsets);
  void AddStringList(std::string name, const std::vector<std::vector<std::string>>& rows);
  // The footer's key/value metadata.
  void AddKeyValue(std::string key, std::string value);

  // The file's bytes. An error names the column when rows disagree, offsets are not a
  // non-decreasing run from 0 to the values, or a name is empty or repeated.
  common::Result<std::string> Finish() const;
  // Finish, then writes `path` (replacing it).
  common::Status WriteFile(const std::string& path) const;

  // One column as given: fixed-width elements as their PLAIN bytes, or strings; a list's
  // offsets (empty for a flat column).
  struct Column {
    std::string name;
    PhysicalType type = PhysicalType::kInt64;
    bool utf8 = false;
    bool list = false;
    std::string fixed;
    std::vector<std::string> strings;
    std::vector<int64_t> offsets;
    int64_t rows = 0;
  };

 private:
  WriterOptions options_;
  std::vector<Column> columns_;
  std::vector<KeyValue> key_values_;
};

// rows + 1 offsets for rows of `length` elements each.
std::vector<int64_t> FixedOffsets(int64_t rows, int64_t length);

}  // namespace storage::parquet
