// The delta encodings (Encodings.md): DELTA_BINARY_PACKED for INT32 and INT64,
// DELTA_LENGTH_BYTE_ARRAY (delta-packed lengths, then the bytes) and DELTA_BYTE_ARRAY (prefix
// lengths and suffixes, front coding). Arithmetic wraps in two's complement as the
// specification requires, so extreme values and deltas round-trip.
//
// Bounds: the header's block size is a multiple of 128 (at most 2^20) split into miniblocks of
// a multiple of 32 values, a miniblock's bit width is at most the type's width, and every
// miniblock read must lie inside the bytes given. Decoders produce exactly the values asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "storage/parquet/column_values.h"

namespace storage::parquet {

// Appends the first `count` values of a DELTA_BINARY_PACKED stream to `out`, which grows block
// by block as values are decoded (so a count the data does not hold fails before it is
// allocated). The stream must hold at least `count` values. `*consumed`, when given, is where
// the stream ends, padding of the last miniblock included; it then must hold exactly `count`.
template <typename T>
common::Status DecodeDeltaBinaryPacked(const uint8_t* data, size_t size, int64_t count,
                                       std::vector<T>* out, size_t* consumed = nullptr);

// DELTA_LENGTH_BYTE_ARRAY: `count` byte arrays appended to `out`.
common::Status DecodeDeltaLengthByteArray(const uint8_t* data, size_t size, int64_t count,
                                          ColumnValues* out);

// DELTA_BYTE_ARRAY: `count` byte arrays appended to `out`. Values rebuilt from prefixes can be
// far longer than the section; more than `max_bytes` in all is an error.
common::Status DecodeDeltaByteArray(const uint8_t* data, size_t size, int64_t count,
                                    uint64_t max_bytes, ColumnValues* out);

extern template common::Status DecodeDeltaBinaryPacked<int32_t>(const uint8_t*, size_t, int64_t,
                                                                std::vector<int32_t>*, size_t*);
extern template common::Status DecodeDeltaBinaryPacked<int64_t>(const uint8_t*, size_t, int64_t,
                                                                std::vector<int64_t>*, size_t*);

}  // namespace storage::parquet
