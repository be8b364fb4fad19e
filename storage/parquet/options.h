// The bounds a Parquet reader holds a file to. Every size and count a file states is checked
// against the file itself (a page inside its column chunk, a chunk inside the file) and against
// these before anything of that size is allocated; a file over a bound is refused with
// kResourceExhausted, naming the bound. The defaults fit LeRobot datasets with room to spare;
// the fuzzer runs with small ones.
#pragma once

#include <cstdint>

namespace storage::parquet {

struct ReaderOptions {
  // The footer's FileMetaData.
  uint64_t max_metadata_bytes = uint64_t{64} << 20;
  // One page, compressed or not (a page header's sizes are i32, so at most 2 GiB anyway).
  uint64_t max_page_bytes = uint64_t{1} << 30;
  // One column chunk's bytes (its pages are read a few MiB at a time; a larger chunk is refused).
  uint64_t max_column_chunk_bytes = uint64_t{2} << 30;
  // Levels (values, nulls included) of one column chunk.
  int64_t max_column_values = int64_t{1} << 30;
  // Bytes of decoded values and levels of one read: a column chunk, or all of a column's chunks
  // when they are read as one (byte arrays can expand past the page bytes through dictionaries
  // and front coding).
  uint64_t max_decoded_bytes = uint64_t{4} << 30;
  // Schema nesting below the root (levels are kept in a byte, so at most 250 is used).
  int max_nesting_depth = 32;
};

}  // namespace storage::parquet
