// Memory for the column chunk decoder: a scratch buffer that grows without zero-filling, the
// read-ahead window a chunk's pages are walked through, and geometric growth of output arrays
// backed by transparent huge pages. Internal to storage/parquet.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "storage/parquet/byte_source.h"

namespace storage::parquet {

// A byte buffer that grows without zero-filling: pages are decompressed into it and every byte
// is written before it is read.
class Scratch {
 public:
  uint8_t* Get(size_t n) {
    if (n > capacity_) {
      data_.reset(new uint8_t[n]);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t capacity_ = 0;
};

// Large output arrays are backed by transparent huge pages where the kernel offers them on
// request: a fresh 256 MiB float array otherwise costs 65,536 page faults to first touch, as
// much time as the decompression. Advisory only; the data is the same either way.
inline void AdviseHugePages(const void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 4 * kHuge) return;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

// Room for `extra` more elements, growing geometrically so that chunk after chunk appended to
// one vector costs no more copies than one push_back stream.
template <typename T>
void Grow(std::vector<T>* v, size_t extra) {
  const size_t need = v->size() + extra;
  if (need <= v->capacity()) return;
  v->reserve(std::max(need, 2 * v->capacity()));
  AdviseHugePages(v->data(), v->capacity() * sizeof(T));
}

// The chunk's bytes as the decoder walks them: a window read ahead from the source (a few
// pages at once), or the source's own bytes when it is in memory. A view is valid until the
// next call.
class ChunkWindow {
 public:
  static constexpr size_t kReadAhead = size_t{4} << 20;

  ChunkWindow(const ByteSource& source, uint64_t start, uint64_t length)
      : source_(source), start_(start), length_(length) {}

  uint64_t length() const { return length_; }

  // Bytes [offset, offset + n) of the chunk; the caller keeps the range inside the chunk.
  common::Status View(uint64_t offset, size_t n, const uint8_t** out) {
    if (const uint8_t* all = source_.data()) {
      *out = all + start_ + offset;
      return common::Status::Ok();
    }
    if (offset < window_start_ || offset + n > window_start_ + window_size_) {
      const size_t load = static_cast<size_t>(
          std::max<uint64_t>(n, std::min<uint64_t>(kReadAhead, length_ - offset)));
      EMBODY_RETURN_IF_ERROR(source_.Read(start_ + offset, load, buffer_.Get(load)));
      window_start_ = offset;
      window_size_ = load;
    }
    *out = buffer_.Get(0) + (offset - window_start_);
    return common::Status::Ok();
  }

 private:
  const ByteSource& source_;
  const uint64_t start_, length_;
  uint64_t window_start_ = 0;
  size_t window_size_ = 0;
  Scratch buffer_;
};

}  // namespace storage::parquet
