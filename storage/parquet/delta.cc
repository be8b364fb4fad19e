#include "storage/parquet/delta.h"

#include <algorithm>
#include <string>
#include <vector>

#include "storage/parquet/rle.h"

namespace storage::parquet {

namespace {

using common::Status;

constexpr uint64_t kMaxBlockSize = uint64_t{1} << 20;

Status DeltaMalformed(const std::string& what) {
  return common::InvalidArgument("DELTA_BINARY_PACKED: " + what);
}

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  Status Uleb(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= size_) return DeltaMalformed("a varint runs past the end");
      const uint8_t b = data_[pos_++];
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return Status::Ok();
      }
    }
    return DeltaMalformed("a varint is longer than 10 bytes");
  }
  Status ZigZag(uint64_t* out) {  // kept unsigned: the decoder adds modulo 2^64
    uint64_t v = 0;
    EMBODY_RETURN_IF_ERROR(Uleb(&v));
    *out = (v >> 1) ^ (~(v & 1) + 1);
    return Status::Ok();
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

template <typename T>
Status DecodeDeltaBinaryPacked(const uint8_t* data, size_t size, int64_t count, std::vector<T>* out,
                               size_t* consumed) {
  constexpr int kTypeBits = 8 * sizeof(T);
  Cursor c(data, size);
  uint64_t block_size = 0, miniblocks = 0, total_count = 0, first = 0;
  EMBODY_RETURN_IF_ERROR(c.Uleb(&block_size));
  EMBODY_RETURN_IF_ERROR(c.Uleb(&miniblocks));
  EMBODY_RETURN_IF_ERROR(c.Uleb(&total_count));
  EMBODY_RETURN_IF_ERROR(c.ZigZag(&first));
  if (block_size == 0 || block_size % 128 != 0 || block_size > kMaxBlockSize) {
    return DeltaMalformed("block size " + std::to_string(block_size) +
                          " is not a multiple of 128 up to 2^20");
  }
  if (miniblocks == 0 || block_size % miniblocks != 0 || (block_size / miniblocks) % 32 != 0) {
    return DeltaMalformed(std::to_string(miniblocks) + " miniblocks do not split a block of " +
                          std::to_string(block_size) + " into multiples of 32 values");
  }
  // A caller that needs the stream's end (the lengths before byte-array data) needs all of
  // it; otherwise only the first `count` values are decoded.
  if (count < 0 || total_count < static_cast<uint64_t>(count) ||
      (consumed && total_count != static_cast<uint64_t>(count))) {
    return DeltaMalformed("the stream holds " + std::to_string(total_count) + " values, not the " +
                          std::to_string(count) + " expected");
  }
  const uint64_t per_miniblock = block_size / miniblocks;
  const uint64_t wanted = static_cast<uint64_t>(count);
  if (wanted == 0) {
    if (consumed) *consumed = c.pos_;
    return Status::Ok();
  }
  uint64_t produced = 0;
  uint64_t last = first;
  out->push_back(static_cast<T>(first));
  ++produced;
  uint64_t deltas[32];
  while (produced < wanted) {
    uint64_t min_delta = 0;
    EMBODY_RETURN_IF_ERROR(c.ZigZag(&min_delta));
    if (c.size_ - c.pos_ < miniblocks)
      return DeltaMalformed("miniblock bit widths run past the end");
    const uint8_t* widths = c.data_ + c.pos_;
    c.pos_ += static_cast<size_t>(miniblocks);
    for (uint64_t m = 0; m < miniblocks && produced < wanted; ++m) {
      const int bw = widths[m];
      if (bw > kTypeBits) {
        return DeltaMalformed("miniblock bit width " + std::to_string(bw) + " is wider than the " +
                              std::to_string(kTypeBits) + "-bit type");
      }
      const uint64_t full = PackedBytes(per_miniblock, bw);
      const uint64_t need = std::min<uint64_t>(per_miniblock, wanted - produced);
      const size_t left = c.size_ - c.pos_;
      // The last miniblock is padded to full size by the specification; one without the
      // padding is accepted where the data ends with it.
      if (full > left && PackedBytes(need, bw) > left) {
        return DeltaMalformed("a miniblock of " + std::to_string(full) +
                              " bytes runs past the end");
      }
      const uint8_t* p = c.data_ + c.pos_;
      const size_t avail = static_cast<size_t>(std::min<uint64_t>(full, left));
      for (uint64_t done = 0; done < need; done += 32) {
        const int64_t n = static_cast<int64_t>(std::min<uint64_t>(32, need - done));
        const uint64_t byte = done * static_cast<uint64_t>(bw) / 8;
        UnpackBits<uint64_t>(p + byte, avail - byte, bw, n, deltas);
        for (int64_t i = 0; i < n; ++i) {
          last += min_delta + deltas[i];  // modulo 2^64; truncation to T keeps it right for i32
          out->push_back(static_cast<T>(last));
          ++produced;
        }
      }
      c.pos_ += avail;
    }
  }
  if (consumed) *consumed = c.pos_;
  return Status::Ok();
}

template Status DecodeDeltaBinaryPacked<int32_t>(const uint8_t*, size_t, int64_t,
                                                 std::vector<int32_t>*, size_t*);
template Status DecodeDeltaBinaryPacked<int64_t>(const uint8_t*, size_t, int64_t,
                                                 std::vector<int64_t>*, size_t*);

namespace {

// The lengths that head both byte-array encodings: exactly `count` of them, none negative.
Status DecodeLengths(const uint8_t* data, size_t size, int64_t count, const char* what,
                     std::vector<int32_t>* lengths, size_t* consumed) {
  lengths->clear();
  Status s = DecodeDeltaBinaryPacked<int32_t>(data, size, count, lengths, consumed);
  if (!s.ok()) return common::InvalidArgument(std::string(what) + " lengths: " + s.message());
  for (int32_t len : *lengths) {
    if (len < 0) return common::InvalidArgument(std::string(what) + ": a negative length");
  }
  return Status::Ok();
}

}  // namespace

Status DecodeDeltaLengthByteArray(const uint8_t* data, size_t size, int64_t count,
                                  ColumnValues* out) {
  if (count < 0) return common::InvalidArgument("DELTA_LENGTH_BYTE_ARRAY: negative count");
  std::vector<int32_t> lengths;
  size_t pos = 0;
  EMBODY_RETURN_IF_ERROR(
      DecodeLengths(data, size, count, "DELTA_LENGTH_BYTE_ARRAY", &lengths, &pos));
  uint64_t sum = 0;
  for (int32_t len : lengths) sum += static_cast<uint64_t>(len);
  if (sum > size - pos) {
    return common::InvalidArgument("DELTA_LENGTH_BYTE_ARRAY: " + std::to_string(sum) +
                                   " bytes of values where " + std::to_string(size - pos) +
                                   " remain");
  }
  out->bytes.append(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(sum));
  int64_t offset = out->offsets.back();
  out->offsets.reserve(out->offsets.size() + lengths.size());
  for (int32_t len : lengths) out->offsets.push_back(offset += len);
  return Status::Ok();
}

Status DecodeDeltaByteArray(const uint8_t* data, size_t size, int64_t count, uint64_t max_bytes,
                            ColumnValues* out) {
  if (count < 0) return common::InvalidArgument("DELTA_BYTE_ARRAY: negative count");
  std::vector<int32_t> prefixes, suffixes;
  size_t pos = 0, pos2 = 0;
  EMBODY_RETURN_IF_ERROR(DecodeLengths(data, size, count, "DELTA_BYTE_ARRAY", &prefixes, &pos));
  EMBODY_RETURN_IF_ERROR(
      DecodeLengths(data + pos, size - pos, count, "DELTA_BYTE_ARRAY", &suffixes, &pos2));
  pos += pos2;
  const bool fixed = out->type == PhysicalType::kFixedLenByteArray;
  uint64_t added = 0;
  std::string previous;
  for (int64_t i = 0; i < count; ++i) {
    const size_t prefix = static_cast<size_t>(prefixes[static_cast<size_t>(i)]);
    const size_t suffix = static_cast<size_t>(suffixes[static_cast<size_t>(i)]);
    if (prefix > previous.size()) {
      return common::InvalidArgument("DELTA_BYTE_ARRAY: prefix of " + std::to_string(prefix) +
                                     " bytes is longer than the previous value");
    }
    if (suffix > size - pos) {
      return common::InvalidArgument("DELTA_BYTE_ARRAY: suffix runs past the end");
    }
    added += prefix + suffix;
    if (added > max_bytes) {
      return Status(common::Code::kResourceExhausted,
                    "DELTA_BYTE_ARRAY values expand past " + std::to_string(max_bytes) + " bytes");
    }
    previous.resize(prefix);
    previous.append(reinterpret_cast<const char*>(data + pos), suffix);
    pos += suffix;
    if (fixed && previous.size() != static_cast<size_t>(out->type_length)) {
      return common::InvalidArgument("DELTA_BYTE_ARRAY: a value of " +
                                     std::to_string(previous.size()) + " bytes in a column of " +
                                     std::to_string(out->type_length));
    }
    out->bytes += previous;
    out->offsets.push_back(static_cast<int64_t>(out->bytes.size()));
  }
  return Status::Ok();
}

}  // namespace storage::parquet
