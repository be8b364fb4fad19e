// Checkpoint blobs on the server's disk:
//   <data-dir>/checkpoints/tenant-<t>/job-<j>/<id>.part   while uploading (0600)
//   <data-dir>/checkpoints/tenant-<t>/job-<j>/<id>.ckpt   once committed
// The database row (checkpoint_index.h) says which state a checkpoint is in; the file follows it.
// A chunk is written at its offset after cutting the part file back to that offset, so bytes of
// an earlier attempt whose row update never committed cannot linger, then fdatasync'ed before the
// row says they are held. Publish renames the part into place and fsyncs the directory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "controlplane/service/checkpoint_index.h"

namespace controlplane::service {

using common::Result;
using common::Status;

// An open, committed blob: read with pread; the descriptor stays valid if the file is deleted
// meanwhile (retention), so a download in progress completes.
class BlobReader {
 public:
  explicit BlobReader(int fd, int64_t size) : fd_(fd), size_(size) {}
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

class CheckpointFiles {
 public:
  explicit CheckpointFiles(std::string data_dir) : root_(std::move(data_dir) + "/checkpoints") {}

  Status AppendChunk(const CheckpointBlob& c, int64_t offset, const std::string& data) const;
  // Size and SHA-256 of the part file.
  struct Digest {
    int64_t bytes = 0;
    std::string sha256;
  };
  Result<Digest> DigestPart(const CheckpointBlob& c) const;
  Status Publish(const CheckpointBlob& c) const;
  Result<std::shared_ptr<BlobReader>> Open(const CheckpointBlob& c) const;
  // Removes the part or committed file; missing files are fine.
  void Remove(const CheckpointBlob& c) const;

 private:
  std::string Dir(const CheckpointBlob& c) const;
  std::string PartPath(const CheckpointBlob& c) const;
  std::string BlobPath(const CheckpointBlob& c) const;
  std::string root_;
};

}  // namespace controlplane::service
