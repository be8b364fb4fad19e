// Where a Parquet file's bytes come from: a file on disk (pread through RandomAccessFile), or
// memory (tests, the fuzzer). Readers fetch what they need at offsets; a source in memory also
// hands out its bytes directly so nothing is copied.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "common/status.h"

namespace storage::parquet {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Exactly `size` bytes at `offset`; thread-safe.
  virtual common::Status Read(uint64_t offset, size_t size, void* out) const = 0;
  // All the bytes, when they are in memory already; nullptr otherwise.
  virtual const uint8_t* data() const { return nullptr; }
};

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string bytes) : bytes_(std::move(bytes)) {}
  uint64_t size() const override { return bytes_.size(); }
  common::Status Read(uint64_t offset, size_t size, void* out) const override {
    if (offset > bytes_.size() || size > bytes_.size() - offset) {
      return common::FailedPrecondition("read past the end of the buffer");
    }
    if (size) std::memcpy(out, bytes_.data() + offset, size);
    return common::Status::Ok();
  }
  const uint8_t* data() const override { return reinterpret_cast<const uint8_t*>(bytes_.data()); }

 private:
  std::string bytes_;
};

}  // namespace storage::parquet
