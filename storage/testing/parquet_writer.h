// Test and benchmark helpers for the Parquet reader: the inverse of its parsers, kept simple.
//
// - CompactWriter and Serialize* (from storage/parquet/metadata_writer.h): Thrift compact bytes
//   for the metadata structs, so tests can state any footer or page header, including ones that
//   lie (sizes, counts, nesting), and check the reader refuses them.
// - Reference encoders (RLE/bit-packed hybrid, DELTA_BINARY_PACKED, BYTE_STREAM_SPLIT) written
//   from the specification, for unit tests of the decoders. The decoders are also checked
//   against files from an independent writer (storage/parquet/testdata), so a shared
//   misreading of the specification would show there.
// - WriteSimpleFile: a small writer of flat columns and fixed-length lists of numbers, PLAIN
//   values and RLE levels, in any supported codec; the benchmark uses it to make large files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "storage/parquet/metadata.h"
#include "storage/parquet/metadata_writer.h"
#include "storage/parquet/thrift_compact_writer.h"

namespace storage::testing {

// Moved into the library for the writer (storage/parquet/writer.h); the tests keep these names.
using parquet::CompactWriter;
using parquet::SerializeFileMetaData;
using parquet::SerializePageHeader;

// RLE runs for repeats of 8 or more, bit-packed groups for the rest (as common writers do).
std::string EncodeRleHybrid(const std::vector<uint32_t>& values, int bit_width);
// One bit-packed run of all values (padded to a multiple of 8 with zeros).
std::string EncodeBitPackedRun(const std::vector<uint32_t>& values, int bit_width);
// `int32`: deltas wrap in 32 bits, as an INT32 column's writer computes them.
std::string EncodeDeltaBinaryPacked(const std::vector<int64_t>& values, int block_size = 128,
                                    int miniblocks = 4, bool int32 = false);
std::string EncodeByteStreamSplit(const void* values, size_t count, int width);
// Compresses a page body with the codec (0, 1, 2, 6).
std::string CompressPage(int32_t codec, const std::string& raw);

struct SimpleColumn {
  std::string name;
  parquet::PhysicalType type = parquet::PhysicalType::kFloat;  // FLOAT, DOUBLE, INT32, INT64
  // 0: a required flat column. N > 0: an optional LIST of optional elements with N per row
  // (the shape Arrow writers give a fixed-size list).
  int list_length = 0;
  const void* values = nullptr;  // rows x max(1, list_length) values of `type`
  // Lists only: when > 0, every row r with r % null_every == null_every - 1 is a null list
  // (its slots in `values` are skipped).
  int64_t null_every = 0;
};

struct SimpleFileOptions {
  int32_t codec = 1;  // SNAPPY
  int64_t rows_per_page = 4096;
  int64_t rows_per_row_group = 1 << 20;
  bool page_v2 = false;
};

// A whole Parquet file's bytes.
std::string WriteSimpleFile(const std::vector<SimpleColumn>& columns, int64_t rows,
                            const SimpleFileOptions& options);

// The bytes of `s`, as the readers take them.
inline const uint8_t* U8(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

}  // namespace storage::testing
