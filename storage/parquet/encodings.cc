#include "storage/parquet/encodings.h"

#include <cstddef>
#include <cstring>
#include <iterator>

#include "storage/parquet/rle.h"

namespace storage::parquet {

namespace {

using common::Status;

// Reads T from bytes at any alignment (values in a page follow its levels, so a float can
// start at any byte). A random-access iterator, so that vector::insert sizes the vector once
// and copies straight into it, without the zero-filling pass a resize would make first.
template <typename T>
class UnalignedIterator {
 public:
  using iterator_category = std::random_access_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using pointer = const T*;
  using reference = T;

  explicit UnalignedIterator(const uint8_t* p) : p_(p) {}
  T operator*() const {
    T v;
    std::memcpy(&v, p_, sizeof(T));
    return v;
  }
  UnalignedIterator& operator++() {
    p_ += sizeof(T);
    return *this;
  }
  UnalignedIterator operator++(int) {
    UnalignedIterator old = *this;
    p_ += sizeof(T);
    return old;
  }
  UnalignedIterator& operator--() {
    p_ -= sizeof(T);
    return *this;
  }
  UnalignedIterator& operator+=(difference_type n) {
    p_ += n * static_cast<difference_type>(sizeof(T));
    return *this;
  }
  UnalignedIterator operator+(difference_type n) const { return UnalignedIterator(*this) += n; }
  difference_type operator-(const UnalignedIterator& o) const {
    return (p_ - o.p_) / static_cast<difference_type>(sizeof(T));
  }
  T operator[](difference_type n) const { return *(*this + n); }
  bool operator==(const UnalignedIterator& o) const { return p_ == o.p_; }
  bool operator!=(const UnalignedIterator& o) const { return p_ != o.p_; }
  bool operator<(const UnalignedIterator& o) const { return p_ < o.p_; }

 private:
  const uint8_t* p_;
};

// Appends `count` fixed-width values copied from `data` to `v` (the values are little-endian on
// disk and in memory).
template <typename T>
void AppendRaw(const uint8_t* data, int64_t count, std::vector<T>* v) {
  v->insert(v->end(), UnalignedIterator<T>(data),
            UnalignedIterator<T>(data + static_cast<size_t>(count) * sizeof(T)));
}

Status TooShort(const char* encoding, int64_t count, size_t size) {
  return common::InvalidArgument(std::string(encoding) + ": " + std::to_string(count) +
                                 " values do not fit in " + std::to_string(size) + " bytes");
}

// Un-splits `count` values of K bytes (K streams of `count` bytes) into `out`. K is a
// compile-time constant for the common widths so the inner loop is a fixed shuffle.
template <int K>
void UnsplitFixed(const uint8_t* in, int64_t count, uint8_t* out) {
  const uint8_t* s[K];
  for (int k = 0; k < K; ++k) s[k] = in + k * count;
  for (int64_t i = 0; i < count; ++i) {
    for (int k = 0; k < K; ++k) out[i * K + k] = s[k][i];
  }
}

void Unsplit(const uint8_t* in, int64_t count, int width, uint8_t* out) {
  switch (width) {
    case 4:
      UnsplitFixed<4>(in, count, out);
      return;
    case 8:
      UnsplitFixed<8>(in, count, out);
      return;
    default:
      for (int64_t i = 0; i < count; ++i) {
        for (int k = 0; k < width; ++k) out[i * width + k] = in[k * count + i];
      }
  }
}

template <typename T>
void AppendUnsplit(const uint8_t* data, int64_t count, std::vector<T>* v) {
  const size_t old = v->size();
  v->resize(old + static_cast<size_t>(count));
  Unsplit(data, count, sizeof(T), reinterpret_cast<uint8_t*>(v->data() + old));
}

}  // namespace

Status DecodePlain(const uint8_t* data, size_t size, int64_t count, ColumnValues* out,
                   size_t* consumed) {
  if (count < 0) return common::InvalidArgument("PLAIN: negative value count");
  const uint64_t n = static_cast<uint64_t>(count);
  size_t used = 0;
  switch (out->type) {
    case PhysicalType::kBoolean: {
      used = static_cast<size_t>(PackedBytes(n, 1));
      if (used > size) return TooShort("PLAIN", count, size);
      const size_t old = out->bools.size();
      out->bools.resize(old + n);
      UnpackBits(data, used, 1, count, out->bools.data() + old);
      break;
    }
    case PhysicalType::kInt32:
    case PhysicalType::kFloat:
      if (n > size / 4) return TooShort("PLAIN", count, size);
      used = n * 4;
      if (out->type == PhysicalType::kInt32) {
        AppendRaw(data, count, &out->i32);
      } else {
        AppendRaw(data, count, &out->f32);
      }
      break;
    case PhysicalType::kInt64:
    case PhysicalType::kDouble:
      if (n > size / 8) return TooShort("PLAIN", count, size);
      used = n * 8;
      if (out->type == PhysicalType::kInt64) {
        AppendRaw(data, count, &out->i64);
      } else {
        AppendRaw(data, count, &out->f64);
      }
      break;
    case PhysicalType::kInt96:
    case PhysicalType::kFixedLenByteArray: {
      const size_t width = static_cast<size_t>(FixedWidth(out->type, out->type_length));
      if (width == 0 || n > size / width) return TooShort("PLAIN", count, size);
      used = n * width;
      int64_t offset = out->offsets.back();
      out->bytes.append(reinterpret_cast<const char*>(data), used);
      out->offsets.reserve(out->offsets.size() + n);
      for (uint64_t i = 0; i < n; ++i) {
        offset += static_cast<int64_t>(width);
        out->offsets.push_back(offset);
      }
      break;
    }
    case PhysicalType::kByteArray: {
      // Every value takes at least its 4-byte length: bound the count before reserving.
      if (n > size / 4) return TooShort("PLAIN", count, size);
      out->offsets.reserve(out->offsets.size() + n);
      for (uint64_t i = 0; i < n; ++i) {
        if (size - used < 4) return TooShort("PLAIN", count, size);
        uint32_t length;
        std::memcpy(&length, data + used, 4);
        used += 4;
        if (length > size - used) {
          return common::InvalidArgument("PLAIN: byte array " + std::to_string(i) + " of " +
                                         std::to_string(length) + " bytes runs past the end");
        }
        out->bytes.append(reinterpret_cast<const char*>(data + used), length);
        used += length;
        out->offsets.push_back(static_cast<int64_t>(out->bytes.size()));
      }
      break;
    }
  }
  if (consumed) *consumed = used;
  return Status::Ok();
}

Status DecodeByteStreamSplit(const uint8_t* data, size_t size, int64_t count, ColumnValues* out) {
  const int width = FixedWidth(out->type, out->type_length);
  if (width == 0 || out->type == PhysicalType::kInt96) {
    return Status(common::Code::kUnimplemented, "BYTE_STREAM_SPLIT is not defined for " +
                                                    std::string(PhysicalTypeName(out->type)));
  }
  if (count < 0 || static_cast<uint64_t>(count) * static_cast<uint64_t>(width) != size) {
    return common::InvalidArgument("BYTE_STREAM_SPLIT: " + std::to_string(count) + " values of " +
                                   std::to_string(width) + " bytes do not fill the " +
                                   std::to_string(size) + " bytes of the section");
  }
  switch (out->type) {
    case PhysicalType::kInt32:
      AppendUnsplit(data, count, &out->i32);
      break;
    case PhysicalType::kInt64:
      AppendUnsplit(data, count, &out->i64);
      break;
    case PhysicalType::kFloat:
      AppendUnsplit(data, count, &out->f32);
      break;
    case PhysicalType::kDouble:
      AppendUnsplit(data, count, &out->f64);
      break;
    default: {
      const size_t old = out->bytes.size();
      out->bytes.resize(old + size);
      Unsplit(data, count, width, reinterpret_cast<uint8_t*>(out->bytes.data() + old));
      int64_t offset = out->offsets.back();
      for (int64_t i = 0; i < count; ++i) out->offsets.push_back(offset += width);
    }
  }
  return Status::Ok();
}

Status DecodeRleBooleans(const uint8_t* data, size_t size, int64_t count, ColumnValues* out) {
  if (size < 4) return common::InvalidArgument("RLE booleans: no length prefix");
  uint32_t length;
  std::memcpy(&length, data, 4);
  if (length > size - 4) {
    return common::InvalidArgument("RLE booleans: length " + std::to_string(length) +
                                   " runs past the end");
  }
  const size_t old = out->bools.size();
  out->bools.resize(old + static_cast<size_t>(count));
  RleBitPackedDecoder decoder(data + 4, length, 1);
  return decoder.Decode(out->bools.data() + old, count);
}

Status GatherDictionary(const ColumnValues& dict, const uint32_t* indices, int64_t count,
                        uint64_t max_bytes, ColumnValues* out) {
  const uint64_t n = static_cast<uint64_t>(dict.size());
  for (int64_t i = 0; i < count; ++i) {
    if (indices[i] >= n) {
      return common::InvalidArgument("dictionary index " + std::to_string(indices[i]) +
                                     " is past the dictionary's " + std::to_string(n) + " entries");
    }
  }
  auto gather = [&](const auto& src, auto& dst) {
    const size_t old = dst.size();
    dst.resize(old + static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) dst[old + static_cast<size_t>(i)] = src[indices[i]];
  };
  switch (out->type) {
    case PhysicalType::kBoolean:
      gather(dict.bools, out->bools);
      break;
    case PhysicalType::kInt32:
      gather(dict.i32, out->i32);
      break;
    case PhysicalType::kInt64:
      gather(dict.i64, out->i64);
      break;
    case PhysicalType::kFloat:
      gather(dict.f32, out->f32);
      break;
    case PhysicalType::kDouble:
      gather(dict.f64, out->f64);
      break;
    default: {
      uint64_t total = 0;
      for (int64_t i = 0; i < count; ++i) {
        total += static_cast<uint64_t>(dict.offsets[indices[i] + 1] - dict.offsets[indices[i]]);
      }
      // A short dictionary entry repeated by many indices can expand without limit.
      if (total > max_bytes) {
        return Status(common::Code::kResourceExhausted,
                      "dictionary-encoded byte arrays expand to " + std::to_string(total) +
                          " bytes, more than the " + std::to_string(max_bytes) + " allowed");
      }
      out->bytes.reserve(out->bytes.size() + total);
      out->offsets.reserve(out->offsets.size() + static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) out->AppendFrom(dict, indices[i]);
    }
  }
  return Status::Ok();
}

}  // namespace storage::parquet
