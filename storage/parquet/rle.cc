#include "storage/parquet/rle.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <utility>

namespace storage::parquet {

static_assert(std::endian::native == std::endian::little,
              "the unpacking below loads little-endian words directly");

namespace {

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Up to 8 bytes at `byte`, zero past the end of `in`.
inline uint64_t Load64Tail(const uint8_t* in, size_t in_size, uint64_t byte) {
  if (byte + 8 <= in_size) return Load64(in + byte);
  uint64_t v = 0;
  for (uint64_t i = byte; i < in_size && i < byte + 8; ++i)
    v |= uint64_t{in[i]} << (8 * (i - byte));
  return v;
}

// One value of `bw` bits at bit offset `bit`, bounds-checked (the slow path).
inline uint64_t ValueAt(const uint8_t* in, size_t in_size, uint64_t bit, int bw) {
  const uint64_t byte = bit >> 3;
  const int shift = static_cast<int>(bit & 7);
  uint64_t v = Load64Tail(in, in_size, byte) >> shift;
  if (shift + bw > 64) v |= Load64Tail(in, in_size, byte + 8) << (64 - shift);
  return bw == 64 ? v : v & ((uint64_t{1} << bw) - 1);
}

// Byte -> its 8 one-bit values as 8 bytes, and byte -> its 4 two-bit values as 4 bytes: the
// widths of repetition and definition levels of lists, unpacked by lookup.
constexpr auto kBits1 = [] {
  std::array<uint64_t, 256> t{};
  for (int b = 0; b < 256; ++b) {
    for (int k = 0; k < 8; ++k) t[b] |= static_cast<uint64_t>((b >> k) & 1) << (8 * k);
  }
  return t;
}();
constexpr auto kBits2 = [] {
  std::array<uint32_t, 256> t{};
  for (int b = 0; b < 256; ++b) {
    for (int k = 0; k < 4; ++k) t[b] |= static_cast<uint32_t>((b >> (2 * k)) & 3) << (8 * k);
  }
  return t;
}();

// kBw bits per value, 8 values (kBw bytes) per step while two 8-byte loads stay inside `in`;
// the compiler unrolls the group with constant shifts.
template <int kBw, typename T>
void UnpackFixed(const uint8_t* in, size_t in_size, int64_t count, T* out) {
  if constexpr (kBw == 0) {
    std::fill(out, out + count, T{0});
  } else if constexpr ((kBw == 1 || kBw == 2) && sizeof(T) == 1) {
    const int64_t groups = std::min<int64_t>(count / 8, static_cast<int64_t>(in_size / kBw));
    for (int64_t g = 0; g < groups; ++g) {
      if constexpr (kBw == 1) {
        std::memcpy(out + 8 * g, &kBits1[in[g]], 8);
      } else {
        std::memcpy(out + 8 * g, &kBits2[in[2 * g]], 4);
        std::memcpy(out + 8 * g + 4, &kBits2[in[2 * g + 1]], 4);
      }
    }
    for (int64_t i = groups * 8; i < count; ++i) {
      out[i] = static_cast<T>(ValueAt(in, in_size, static_cast<uint64_t>(i) * kBw, kBw));
    }
  } else {
    constexpr uint64_t kMask = kBw == 64 ? ~uint64_t{0} : (uint64_t{1} << kBw) - 1;
    const int64_t safe_groups =
        in_size >= 16 ? static_cast<int64_t>((in_size - 16) / static_cast<size_t>(kBw)) : 0;
    const int64_t groups = std::min<int64_t>(count / 8, safe_groups);
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* p = in + g * kBw;
      if constexpr (kBw <= 8) {
        const uint64_t w = Load64(p);
        for (int k = 0; k < 8; ++k) out[k] = static_cast<T>((w >> (k * kBw)) & kMask);
      } else {
        for (int k = 0; k < 8; ++k) {
          const int bit = k * kBw;
          const int shift = bit & 7;
          uint64_t v = Load64(p + (bit >> 3)) >> shift;
          if constexpr (kBw > 56) {
            if (shift + kBw > 64) v |= Load64(p + (bit >> 3) + 8) << (64 - shift);
          }
          out[k] = static_cast<T>(v & kMask);
        }
      }
      out += 8;
    }
    const uint64_t start = static_cast<uint64_t>(groups) * 8;
    for (uint64_t i = start; i < static_cast<uint64_t>(count); ++i) {
      *out++ = static_cast<T>(ValueAt(in, in_size, i * kBw, kBw));
    }
  }
}

template <typename T>
using UnpackFn = void (*)(const uint8_t*, size_t, int64_t, T*);

template <typename T, int... kBw>
constexpr std::array<UnpackFn<T>, sizeof...(kBw)> MakeUnpackTable(
    std::integer_sequence<int, kBw...>) {
  return {&UnpackFixed<kBw, T>...};
}

// Widths up to what T holds; wider ones never reach these tables (callers check).
template <typename T>
constexpr auto kUnpackTable =
    MakeUnpackTable<T>(std::make_integer_sequence<int, 8 * sizeof(T) + 1>());

}  // namespace

int BitWidth(uint64_t max_value) { return max_value == 0 ? 0 : std::bit_width(max_value); }

template <typename T>
void UnpackBits(const uint8_t* in, size_t in_size, int bit_width, int64_t count, T* out) {
  if (count <= 0) return;
  kUnpackTable<T>[static_cast<size_t>(bit_width)](in, in_size, count, out);
}

template void UnpackBits<uint8_t>(const uint8_t*, size_t, int, int64_t, uint8_t*);
template void UnpackBits<uint32_t>(const uint8_t*, size_t, int, int64_t, uint32_t*);
template void UnpackBits<uint64_t>(const uint8_t*, size_t, int, int64_t, uint64_t*);

common::Status RleBitPackedDecoder::NextRun() {
  uint64_t header = 0;
  for (int shift = 0;; shift += 7) {
    if (pos_ >= size_) {
      return common::InvalidArgument("RLE/bit-packed data ends before its values (at byte " +
                                     std::to_string(pos_) + ")");
    }
    if (shift > 35) return common::InvalidArgument("RLE/bit-packed run header is too long");
    const uint8_t b = data_[pos_++];
    header |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) break;
  }
  // Runs hold at most 2^31 - 1 values (Encodings.md); a 5-byte header can claim more.
  if (header & 1) {
    const uint64_t groups = header >> 1;
    if (groups * 8 > INT32_MAX) return common::InvalidArgument("bit-packed run is too long");
    const uint64_t full = groups * static_cast<uint64_t>(bit_width_);
    const size_t available = static_cast<size_t>(std::min<uint64_t>(full, size_ - pos_));
    is_rle_ = false;
    packed_ = data_ + pos_;
    packed_size_ = available;
    packed_index_ = 0;
    left_ = bit_width_ == 0 ? static_cast<int64_t>(groups * 8)
                            : static_cast<int64_t>(std::min<uint64_t>(
                                  groups * 8, available * 8 / static_cast<uint64_t>(bit_width_)));
    pos_ += available;
  } else {
    const uint64_t length = header >> 1;
    if (length > INT32_MAX) return common::InvalidArgument("RLE run is too long");
    const size_t bytes = static_cast<size_t>((bit_width_ + 7) / 8);
    if (size_ - pos_ < bytes) {
      return common::InvalidArgument("RLE run value runs past the end of its data");
    }
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += bytes;
    if (bit_width_ < 64 && (v >> bit_width_) != 0) {
      return common::InvalidArgument("RLE run value " + std::to_string(v) + " is wider than " +
                                     std::to_string(bit_width_) + " bits");
    }
    is_rle_ = true;
    value_ = v;
    left_ = static_cast<int64_t>(length);
  }
  return common::Status::Ok();
}

template <typename T>
common::Status RleBitPackedDecoder::Decode(T* out, int64_t count) {
  if (bit_width_ < 0 || bit_width_ > static_cast<int>(8 * sizeof(T))) {
    return common::InvalidArgument("RLE/bit-packed bit width " + std::to_string(bit_width_) +
                                   " is out of range");
  }
  while (count > 0) {
    if (left_ == 0) {
      EMBODY_RETURN_IF_ERROR(NextRun());
      continue;  // a zero-length run is allowed and skipped
    }
    const int64_t n = std::min(left_, count);
    if (is_rle_) {
      std::fill(out, out + n, static_cast<T>(value_));
    } else {
      int64_t done = 0;
      // A run resumed mid-group (a caller decoding in pieces): finish the group first, so the
      // bulk unpack starts on a byte boundary.
      if (packed_index_ % 8 != 0) {
        T group[8];
        const int64_t first = packed_index_ - packed_index_ % 8;
        const uint64_t byte = static_cast<uint64_t>(first) * static_cast<uint64_t>(bit_width_) / 8;
        UnpackBits(packed_ + byte, packed_size_ - byte, bit_width_, 8, group);
        const int64_t k = std::min<int64_t>(n, 8 - packed_index_ % 8);
        std::copy(group + packed_index_ % 8, group + packed_index_ % 8 + k, out);
        done = k;
      }
      if (n > done) {
        const uint64_t byte =
            static_cast<uint64_t>(packed_index_ + done) * static_cast<uint64_t>(bit_width_) / 8;
        UnpackBits(packed_ + byte, packed_size_ - byte, bit_width_, n - done, out + done);
      }
      packed_index_ += n;
    }
    left_ -= n;
    out += n;
    count -= n;
  }
  return common::Status::Ok();
}

common::Status RleBitPackedDecoder::DecodeZeroPositions(int64_t count, int64_t base,
                                                        int64_t max_zeros,
                                                        std::vector<int64_t>* out) {
  if (bit_width_ != 1) {
    return common::InvalidArgument("row starts from levels of bit width " +
                                   std::to_string(bit_width_));
  }
  const size_t limit = out->size() + static_cast<size_t>(std::max<int64_t>(max_zeros, 0));
  auto too_many = [&](int64_t more) { return out->size() + static_cast<size_t>(more) > limit; };
  const common::Status exhausted(common::Code::kResourceExhausted,
                                 "row starts pass the decoded-bytes bound");
  int64_t i = 0;
  while (i < count) {
    if (left_ == 0) {
      EMBODY_RETURN_IF_ERROR(NextRun());
      continue;
    }
    const int64_t n = std::min(left_, count - i);
    if (is_rle_) {
      if (value_ == 0) {
        if (too_many(n)) return exhausted;
        for (int64_t k = 0; k < n; ++k) out->push_back(base + i + k);
      }
    } else {
      // Bit k of byte b is value 8b + k of the run; its zeros are the set bits of ~byte.
      for (int64_t k = 0; k < n;) {
        const int64_t index = packed_index_ + k;
        const int shift = static_cast<int>(index & 7);
        const int64_t take = std::min<int64_t>(8 - shift, n - k);
        uint32_t zeros =
            (~static_cast<uint32_t>(packed_[index >> 3]) >> shift) & ((1u << take) - 1);
        if (too_many(std::popcount(zeros))) return exhausted;
        while (zeros) {
          out->push_back(base + i + k + std::countr_zero(zeros));
          zeros &= zeros - 1;
        }
        k += take;
      }
      packed_index_ += n;
    }
    left_ -= n;
    i += n;
  }
  return common::Status::Ok();
}

template common::Status RleBitPackedDecoder::Decode<uint8_t>(uint8_t*, int64_t);
template common::Status RleBitPackedDecoder::Decode<uint32_t>(uint32_t*, int64_t);

bool RunsAllEqual(const uint8_t* data, size_t size, int bit_width, int64_t count, uint64_t value) {
  size_t pos = 0;
  const size_t value_bytes = static_cast<size_t>((bit_width + 7) / 8);
  while (count > 0) {
    uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= size || shift > 35) return false;
      const uint8_t b = data[pos++];
      header |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    if (header & 1) return false;  // bit-packed
    if (size - pos < value_bytes) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < value_bytes; ++i) v |= uint64_t{data[pos + i]} << (8 * i);
    pos += value_bytes;
    if (v != value) return false;
    const uint64_t length = header >> 1;
    count -= static_cast<int64_t>(std::min<uint64_t>(length, static_cast<uint64_t>(count)));
  }
  return true;
}

common::Status DecodeBitPackedMsbFirst(const uint8_t* data, size_t size, int bit_width,
                                       int64_t count, uint8_t* out) {
  if (PackedBytes(static_cast<uint64_t>(count), bit_width) > size) {
    return common::InvalidArgument("BIT_PACKED levels: " + std::to_string(count) +
                                   " values need more than the " + std::to_string(size) +
                                   " bytes given");
  }
  uint64_t bit = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t v = 0;
    for (int b = 0; b < bit_width; ++b, ++bit) {
      v = (v << 1) | ((data[bit >> 3] >> (7 - (bit & 7))) & 1);
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return common::Status::Ok();
}

namespace {

void AppendUleb(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

void AppendRleBitPacked(const uint8_t* values, size_t count, int bit_width, std::string* out) {
  auto run_at = [&](size_t i) {
    size_t j = i;
    while (j < count && values[j] == values[i]) ++j;
    return j - i;
  };
  const size_t value_bytes = static_cast<size_t>(bit_width + 7) / 8;  // 0 or 1 for levels
  size_t i = 0;
  while (i < count) {
    const size_t run = run_at(i);
    if (run >= 8) {
      AppendUleb(static_cast<uint64_t>(run) << 1, out);
      if (value_bytes) out->push_back(static_cast<char>(values[i]));
      i += run;
      continue;
    }
    // Groups of 8 literals until a run of 8 or more starts on a group boundary.
    size_t j = i;
    do {
      j += 8;
    } while (j < count && run_at(j) < 8);
    const size_t groups = (std::min(j, count) - i + 7) / 8;
    AppendUleb((static_cast<uint64_t>(groups) << 1) | 1, out);
    const size_t start = out->size();
    out->resize(start + groups * static_cast<size_t>(bit_width), '\0');
    uint64_t bit = 0;
    for (size_t k = 0; k < groups * 8; ++k) {
      const uint32_t v = i + k < count ? values[i + k] : 0;
      for (int b = 0; b < bit_width; ++b, ++bit) {
        if ((v >> b) & 1) (*out)[start + (bit >> 3)] |= static_cast<char>(1 << (bit & 7));
      }
    }
    i = std::min(j, count);
  }
}

}  // namespace storage::parquet
