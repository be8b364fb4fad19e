// Decoding one column chunk: its pages in order (an optional dictionary page, then data pages
// v1 or v2), each decompressed and split into repetition levels, definition levels and values.
// The result is the column as Parquet stores it, in the Dremel form: one level pair per entry
// and the non-null values packed; assemble.h turns that into rows, lists and nulls.
//
// Everything a page header claims is checked before it is used: the page lies inside the chunk,
// its uncompressed size is under the page bound, its entries do not exceed what the chunk
// announced, levels do not exceed the schema's maximums, and the values decoded are exactly the
// entries at the maximum definition level. Errors name the page (its index and byte offset in
// the chunk); the file reader adds the file, column and row group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "storage/parquet/byte_source.h"
#include "storage/parquet/column_values.h"
#include "storage/parquet/options.h"
#include "storage/parquet/schema.h"

namespace storage::parquet {

struct ColumnData {
  int column = 0;  // leaf index in the schema
  int max_def = 0;
  int max_rep = 0;
  int64_t num_levels = 0;  // entries: values, nulls and empty lists
  // num_levels of them; empty when max_def == 0 or when every entry is at max_def (no nulls,
  // no empty lists: the common case, kept implicit to spare a byte an entry).
  std::vector<uint8_t> def_levels;
  // Repetition levels: num_levels of them when max_rep >= 2, empty otherwise. With one level of
  // lists (max_rep == 1) a level is 0 where a row starts and 1 elsewhere, so only the row starts
  // are kept: the indexes of the entries with level 0, ascending (the first is 0). They are the
  // list offsets already, a quarter of the bytes of the levels for a row of 26 floats.
  std::vector<uint8_t> rep_levels;
  std::vector<int64_t> row_starts;
  ColumnValues values;  // the non-null values in order
};

// Decodes the column chunk at [start, start + length) of `source` and appends its levels and
// values to `out`, which is empty or holds earlier chunks of the same column (row groups in
// order: their levels concatenate into one valid stream of rows). Pages are read a window at a
// time, so a chunk is never held in memory whole. `num_values` is the chunk's entry count from
// its metadata; `codec` its compression.
common::Status DecodeColumnChunk(const ByteSource& source, uint64_t start, uint64_t length,
                                 const ColumnDescriptor& column, int32_t codec, int64_t num_values,
                                 const ReaderOptions& options, ColumnData* out);

// Reserves room in `out` for `num_values` more entries of `column` when `compressed_bytes` of
// chunks could plausibly hold them (a count the data cannot back is not reserved, only grown
// into as pages decode) and they fit the decoded-bytes bound. Reading several row groups, a
// caller reserves for all of them at once.
void ReserveEntries(const ColumnDescriptor& column, int64_t num_values, uint64_t compressed_bytes,
                    const ReaderOptions& options, ColumnData* out);

}  // namespace storage::parquet
