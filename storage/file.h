// The two file shapes storage/ needs, over POSIX descriptors: a file written once, start to end,
// that appears under its name only when complete (temp name, fsync, rename, fsync of the
// directory), and a file read at offsets by many threads at once (pread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace storage {

// Written at `path + ".tmp"`; Commit() makes it `path`. Destroying an uncommitted file removes
// the temp file, so a failed writer leaves nothing behind (a crash leaves only a *.tmp name,
// which no reader opens).
class AtomicFile {
 public:
  static common::Result<std::unique_ptr<AtomicFile>> Create(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  common::Status Append(const void* data, size_t size);
  common::Status Append(const std::string& s) { return Append(s.data(), s.size()); }
  uint64_t size() const { return size_; }
  common::Status Commit();
  const std::string& path() const { return path_; }

 private:
  AtomicFile(std::string path, std::string tmp, int fd) : path_(path), tmp_(tmp), fd_(fd) {}
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool committed_ = false;
};

// fsync of a directory, so a rename or create inside it is durable.
common::Status SyncDir(const std::string& dir);

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
