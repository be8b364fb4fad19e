// Bit unpacking and the RLE / bit-packing hybrid (Encodings.md, "RLE = 3"): how Parquet stores
// definition and repetition levels, dictionary indices and RLE booleans. Values are packed
// least significant bit first; a run is either one value repeated (RLE) or groups of 8 values
// bit-packed.
//
// The decoder reads only inside the range it is given and decodes exactly the number of values
// asked for; a range that ends before them is an error, never a read past it. A final
// bit-packed run may be shorter than its header says (writers pad the last group, some drop the
// padding), as long as the values asked for are there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace storage::parquet {

// Bits needed for values 0..max_value (0 for max_value 0).
int BitWidth(uint64_t max_value);

// Unpacks `count` values of `bit_width` (0..64) bits, packed LSB first from bit 0 of `in`,
// into `out`. `in` holds `in_size` bytes; bits past its end read as zero, so callers check
// that the values they need are inside it (PackedBytes). T must hold bit_width bits.
template <typename T>
void UnpackBits(const uint8_t* in, size_t in_size, int bit_width, int64_t count, T* out);

// Bytes that `count` values of `bit_width` bits occupy.
inline uint64_t PackedBytes(uint64_t count, int bit_width) {
  return (count * static_cast<uint64_t>(bit_width) + 7) / 8;
}

class RleBitPackedDecoder {
 public:
  // `bit_width` is 0..32.
  RleBitPackedDecoder(const uint8_t* data, size_t size, int bit_width)
      : data_(data), size_(size), bit_width_(bit_width) {}

  // Decodes the next `count` values into `out`. T is uint8_t (levels, bit width <= 8) or
  // uint32_t (dictionary indices).
  template <typename T>
  common::Status Decode(T* out, int64_t count);

  // Decodes the next `count` values without storing them, appending `base + i` for each value
  // i that is 0 (bit width 1: the repetition levels of one level of lists, whose zeros are the
  // row starts). Runs of ones cost nothing; bit-packed bytes are scanned a byte at a time. More
  // than `max_zeros` zeros is kResourceExhausted, found before they are appended.
  common::Status DecodeZeroPositions(int64_t count, int64_t base, int64_t max_zeros,
                                     std::vector<int64_t>* out);

  size_t position() const { return pos_; }

 private:
  common::Status NextRun();

  const uint8_t* data_;
  size_t size_;
  int bit_width_;
  size_t pos_ = 0;
  // The current run: `left` values remain; an RLE run repeats `value`, a bit-packed run reads
  // from `packed` (its bytes end at `packed_end`) starting at value index `packed_index`.
  int64_t left_ = 0;
  bool is_rle_ = false;
  uint64_t value_ = 0;
  const uint8_t* packed_ = nullptr;
  size_t packed_size_ = 0;
  int64_t packed_index_ = 0;
};

// Whether the first `count` values of RLE/bit-packed `data` are all `value`, decided from the
// RLE run headers alone: false at the first bit-packed run, other value or end of data. A page
// whose definition levels are all at the maximum (no nulls, no empty lists) is one such run.
bool RunsAllEqual(const uint8_t* data, size_t size, int bit_width, int64_t count, uint64_t value);

// The deprecated BIT_PACKED encoding of levels (v1 pages of old writers): `count` values packed
// most significant bit first, ceil(count * bit_width / 8) bytes. Returns an error if `size` is
// shorter.
common::Status DecodeBitPackedMsbFirst(const uint8_t* data, size_t size, int bit_width,
                                       int64_t count, uint8_t* out);

// Appends `count` levels (bit width 0..8) in the RLE / bit-packing hybrid: an RLE run for 8 or
// more equal values, bit-packed groups of 8 for the rest (the last group padded with zeros).
// What the writer (writer.h) uses for definition and repetition levels.
void AppendRleBitPacked(const uint8_t* values, size_t count, int bit_width, std::string* out);

extern template void UnpackBits<uint8_t>(const uint8_t*, size_t, int, int64_t, uint8_t*);
extern template void UnpackBits<uint32_t>(const uint8_t*, size_t, int, int64_t, uint32_t*);
extern template void UnpackBits<uint64_t>(const uint8_t*, size_t, int, int64_t, uint64_t*);
extern template common::Status RleBitPackedDecoder::Decode<uint8_t>(uint8_t*, int64_t);
extern template common::Status RleBitPackedDecoder::Decode<uint32_t>(uint32_t*, int64_t);

}  // namespace storage::parquet
