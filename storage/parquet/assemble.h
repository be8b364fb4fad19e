// From Parquet's Dremel form (a definition and repetition level per entry, non-null values
// packed) to rows: list offsets per nesting level, nulls as validity, and one value per leaf
// slot. This is how a LIST<float> column becomes a flat float array plus row offsets (26
// floats a row give offsets 0, 26, 52, ...), and how the nested columns of LeRobot v3 metadata
// (a list of task strings per episode, stats as lists of lists) are read.
//
// The levels are checked as they are walked: a repetition level that continues a list must come
// with an element of that list, and the count of present leaves must match the values decoded.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "storage/parquet/column_chunk.h"
#include "storage/parquet/column_values.h"
#include "storage/parquet/schema.h"

namespace storage::parquet {

struct ListLevel {
  // One more than the lists at this level; list i holds elements [offsets[i], offsets[i + 1])
  // of the next level (or of the leaf values, for the innermost level).
  std::vector<int64_t> offsets = {0};
  std::vector<uint8_t> valid;  // one per list, 0 for a null list; empty when none is null
};

struct NestedColumn {
  int64_t num_rows = 0;
  // Outermost first: lists[0] has one list per row. Empty for a column without lists.
  std::vector<ListLevel> lists;
  // One value per leaf slot (a null is a zero or an empty string there).
  ColumnValues values;
  std::vector<uint8_t> valid;  // one per leaf slot, 0 for null; empty when none is null

  // The common length of every innermost list, or -1 when they differ or there are none.
  int64_t FixedListLength() const;
};

// Builds the rows of `data` (moved from: its values are taken without a copy when no leaf is
// null). `column` is the descriptor `data` was decoded with.
common::Status Assemble(ColumnData&& data, const ColumnDescriptor& column, NestedColumn* out);

// Appends the rows of `src` (same column, another row group) to `dst`.
void AppendRows(NestedColumn&& src, NestedColumn* dst);

}  // namespace storage::parquet
