// Typed reads of the column shapes robot datasets use, over a ParquetFile:
//
//   ReadFlatColumn<T>   a column without lists (int64 frame_index, float timestamp, a string),
//                       with nulls as a validity vector;
//   ReadListColumn<T>   a LIST of T (observation.state, action: 26 float32 per row) as one flat
//                       value array plus per-row offsets, so rows x 26 floats come back in one
//                       std::vector<float> that needs no copy to use;
//   ReadNestedColumn    any depth of lists (LeRobot v3's episode stats, lists of lists), as
//                       offsets per level.
//
// T is bool, int32_t, int64_t, float, double or std::string. A column is read as T when its
// physical type holds T exactly: int64_t also reads INT32 columns and double FLOAT ones
// (widening); std::string reads BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY. Anything else, or a column
// whose nesting is not the shape asked for, is an error naming the column and what it is.
//
// `row_group` selects one row group; kAllRowGroups reads them all, in order, as one column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/parquet/assemble.h"
#include "storage/parquet/reader.h"

namespace storage::parquet {

inline constexpr int kAllRowGroups = -1;

template <typename T>
struct FlatColumn {
  std::vector<T> values;       // one per row; a null is 0 / false / ""
  std::vector<uint8_t> valid;  // one per row, 0 for null; empty when no row is null
};

template <typename T>
struct ListColumn {
  std::vector<T> values;             // every row's elements, back to back
  std::vector<int64_t> offsets;      // rows + 1: row i is values[offsets[i], offsets[i + 1])
  std::vector<uint8_t> valid;        // one per row, 0 for a null list; empty when none is null
  std::vector<uint8_t> value_valid;  // one per element; empty when no element is null

  int64_t rows() const { return static_cast<int64_t>(offsets.size()) - 1; }
  // The length every row shares (26 for a LeRobot state vector), or -1 when rows differ or
  // there are none.
  int64_t FixedLength() const;
};

template <typename T>
common::Result<FlatColumn<T>> ReadFlatColumn(const ParquetFile& file, const std::string& name,
                                             int row_group = kAllRowGroups);

template <typename T>
common::Result<ListColumn<T>> ReadListColumn(const ParquetFile& file, const std::string& name,
                                             int row_group = kAllRowGroups);

// Values stay in their physical type (NestedColumn::values).
common::Result<NestedColumn> ReadNestedColumn(const ParquetFile& file, const std::string& name,
                                              int row_group = kAllRowGroups);

#define EMBODY_PARQUET_COLUMN_TYPES(X) \
  X(bool) X(int32_t) X(int64_t) X(float) X(double) X(std::string)
#define EMBODY_PARQUET_DECLARE(T)                                                           \
  extern template struct ListColumn<T>;                                                     \
  extern template common::Result<FlatColumn<T>> ReadFlatColumn<T>(const ParquetFile&,       \
                                                                  const std::string&, int); \
  extern template common::Result<ListColumn<T>> ReadListColumn<T>(const ParquetFile&,       \
                                                                  const std::string&, int);
EMBODY_PARQUET_COLUMN_TYPES(EMBODY_PARQUET_DECLARE)
#undef EMBODY_PARQUET_DECLARE

}  // namespace storage::parquet
