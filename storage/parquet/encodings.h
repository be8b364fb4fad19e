// Value decoders for a data page's (or dictionary page's) value section: PLAIN,
// BYTE_STREAM_SPLIT, RLE booleans, and the gather of dictionary entries by index. The delta
// encodings are in delta.h. Each appends exactly `count` values to a ColumnValues of the
// column's type, or returns an error when the bytes given cannot hold them; none reads outside
// [data, data + size).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "storage/parquet/column_values.h"

namespace storage::parquet {

// PLAIN: fixed-width values back to back (little-endian), booleans bit-packed LSB first,
// BYTE_ARRAY as a 4-byte length and the bytes. `*consumed`, when given, is the bytes used.
common::Status DecodePlain(const uint8_t* data, size_t size, int64_t count, ColumnValues* out,
                           size_t* consumed = nullptr);

// BYTE_STREAM_SPLIT: K byte streams of `count` bytes each (K the value width) that must fill
// the section exactly. FLOAT, DOUBLE, INT32, INT64 and FIXED_LEN_BYTE_ARRAY.
common::Status DecodeByteStreamSplit(const uint8_t* data, size_t size, int64_t count,
                                     ColumnValues* out);

// Booleans in the RLE encoding: a 4-byte length, then RLE/bit-packed values of width 1.
common::Status DecodeRleBooleans(const uint8_t* data, size_t size, int64_t count,
                                 ColumnValues* out);

// Appends dict[indices[i]] for i < count; an index past the dictionary is an error, and so are
// byte arrays that would add more than `max_bytes` (a long entry repeated many times).
common::Status GatherDictionary(const ColumnValues& dict, const uint32_t* indices, int64_t count,
                                uint64_t max_bytes, ColumnValues* out);

}  // namespace storage::parquet
