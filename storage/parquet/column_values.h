// Decoded values of one Parquet column, held in the vector of their physical type: the one
// container that the page decoders append to and the column readers hand out (a float column's
// values are a std::vector<float> that a caller can take without a copy).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "storage/parquet/metadata.h"

namespace storage::parquet {

struct ColumnValues {
  PhysicalType type = PhysicalType::kBoolean;
  int32_t type_length = 0;  // FIXED_LEN_BYTE_ARRAY width

  // Exactly one of these is used, by `type`.
  std::vector<uint8_t> bools;  // 0 or 1
  std::vector<int32_t> i32;
  std::vector<int64_t> i64;
  std::vector<float> f32;
  std::vector<double> f64;
  // BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY and INT96 (12 bytes each): value i is
  // bytes[offsets[i], offsets[i + 1]).
  std::string bytes;
  std::vector<int64_t> offsets = {0};

  // Empties the values and sets the type they will have.
  void Reset(PhysicalType t, int32_t length);
  int64_t size() const;
  std::string_view View(int64_t i) const {
    return std::string_view(bytes).substr(static_cast<size_t>(offsets[i]),
                                          static_cast<size_t>(offsets[i + 1] - offsets[i]));
  }
  // Appends value `i` of `src`, which has the same type.
  void AppendFrom(const ColumnValues& src, int64_t i);
  // Appends a zero / empty value (the place of a null when values are spread to slots).
  void AppendDefault();
  // Bytes taken by the values (for the decoded-size bound).
  uint64_t ByteSize() const;
};

// Bytes of one PLAIN value of a fixed-width type (0 for BOOLEAN, which is bit-packed, and for
// BYTE_ARRAY, which has a length per value).
int FixedWidth(PhysicalType type, int32_t type_length);

}  // namespace storage::parquet
