// The two file shapes storage/ needs: a file written once, start to end, that appears under its
// name only when complete (common/env.h's atomic file, with storage's temp name), and a file read
// at offsets by many threads at once (pread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/env.h"
#include "common/status.h"

namespace storage {

// Written at `path + ".tmp"` through the one temp+fsync+rename core (common/env.h); Commit()
// makes it `path`. Destroying an uncommitted file removes the temp file, so a failed writer leaves
// nothing behind (a crash leaves only a *.tmp name, which no reader opens).
common::Result<std::unique_ptr<common::AtomicWritableFile>> CreateAtomicFile(
    const std::string& path);

class RandomAccessFile {
 public:
  static common::Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  // Reads exactly `size` bytes at `offset` into `out`; a short read is an error. Thread-safe.
  common::Status Read(uint64_t offset, size_t size, void* out) const;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  RandomAccessFile(std::string path, int fd, uint64_t size) : path_(path), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace storage
