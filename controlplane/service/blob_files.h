// BlobFiles: the bytes of uploaded blobs on the server's own disk, under one root, each named by
// a path relative to it. Checkpoints (checkpoint_files.h) and dataset uploads, OCI images
// included (dataset_upload_files.h), are laid out on it; the database row says how many bytes
// count and which state a blob is in, and the file follows the row.
//
// The discipline every blob shares: a chunk is written at its offset after cutting the part file
// back to that offset, so bytes of an earlier attempt whose row update never committed cannot
// linger, then fdatasync'ed before the row says they are held; files are 0600 and never written
// through a link; a commit renames the part into place and syncs the directory; reads are ranged,
// through a descriptor that stays valid when the file is removed meanwhile, so a download in
// progress completes. Thread-safe (no state but the root).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace controlplane::service {

using common::Result;
using common::Status;

// An open blob read with pread: `size()` bytes from its start.
class BlobReader {
 public:
  // Owns `fd` (closed on destruction).
  BlobReader(int fd, int64_t size) : fd_(fd), size_(size) {}
  ~BlobReader();
  BlobReader(const BlobReader&) = delete;
  BlobReader& operator=(const BlobReader&) = delete;
  int64_t size() const { return size_; }
  // Up to n bytes from offset; fewer only at the end.
  Result<std::string> Read(int64_t offset, size_t n) const;

 private:
  int fd_;
  int64_t size_;
};

class BlobFiles {
 public:
  explicit BlobFiles(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string PathOf(const std::string& name) const { return root_ + "/" + name; }

  // Writes `data` at `offset` of `name` (made 0600 with its directory when missing), dropping
  // anything the file holds past `offset`; durable when it returns.
  Status WriteAt(const std::string& name, int64_t offset, const std::string& data) const;
  struct Digest {
    int64_t bytes = 0;
    std::string sha256;
  };
  // Size and SHA-256 of the first `limit` bytes of `name` (all of it when limit < 0); a missing
  // file is empty.
  Result<Digest> DigestOf(const std::string& name, int64_t limit = -1) const;
  // Renames part `from` to `to` and syncs the directory. A blob that never had a chunk has no
  // part file: with `bytes` == 0 an empty `to` is made instead.
  Status Commit(const std::string& from, const std::string& to, int64_t bytes) const;
  // `name` for reading, at most `limit` bytes of it (all when limit < 0); not_found when missing.
  // The caller compares size() with what its row says.
  Result<std::shared_ptr<BlobReader>> Open(const std::string& name, int64_t limit = -1) const;
  // Removes `name`; a missing file is fine.
  void Remove(const std::string& name) const;
  // The names in directory `dir` (relative to the root) that end in `suffix`, without it, sorted;
  // none when the directory is missing.
  std::vector<std::string> List(const std::string& dir, const std::string& suffix) const;

 private:
  std::string root_;
};

}  // namespace controlplane::service
