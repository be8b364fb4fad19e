// CheckpointSource: a checkpoint file opened for upload, safely.
//
// The file was written by a job, which is tenant code running under its own uid in a directory it
// owns: it can plant a symlink to /etc/shadow or to another job's checkpoint, a FIFO that blocks
// a reader forever, or a file that grows without end. So a source is opened only as a regular
// file named inside a given directory, the directory and the file each opened with O_NOFOLLOW
// (openat from the directory's descriptor, so a path component swapped for a link between the
// check and the open does not redirect it), O_NONBLOCK (a FIFO cannot hang the opener), and its
// size is fixed at open time and bounded. Reads past that size are not made: a file the job keeps
// writing to is read as it was when opened, and its digest is checked against those bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/crypto.h"
#include "common/status.h"

namespace storage {

class CheckpointSource {
 public:
  // `name` must be a plain file name (no '/', not "." or ".."); `dir` is opened without following
  // a symlink in its last component. Refuses anything but a regular file of at most `max_bytes`.
  static common::Result<std::unique_ptr<CheckpointSource>> OpenInDir(const std::string& dir,
                                                                     const std::string& name,
                                                                     int64_t max_bytes);
  // `path` split into its directory and name, then OpenInDir.
  static common::Result<std::unique_ptr<CheckpointSource>> Open(const std::string& path,
                                                                int64_t max_bytes);
  ~CheckpointSource();
  CheckpointSource(const CheckpointSource&) = delete;
  CheckpointSource& operator=(const CheckpointSource&) = delete;

  int64_t size() const { return size_; }
  // Up to `n` bytes from `offset` (clamped to size()); short only at the end.
  common::Result<std::string> ReadAt(int64_t offset, size_t n) const;
  // SHA-256 of the whole file (size() bytes), computed once.
  common::Result<std::string> Sha256Hex();

 private:
  CheckpointSource(int fd, int64_t size) : fd_(fd), size_(size) {}
  int fd_;
  int64_t size_;
  std::string sha256_;
};

// The streaming SHA-256 the backends use.
using Sha256 = common::Sha256;

}  // namespace storage
