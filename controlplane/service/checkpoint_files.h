// Checkpoint blobs on the server's disk (blob_files.h holds the discipline):
//   <data-dir>/checkpoints/tenant-<t>/job-<j>/<id>.part   while uploading (0600)
//   <data-dir>/checkpoints/tenant-<t>/job-<j>/<id>.ckpt   once committed
// The database row (checkpoint_index.h) says which state a checkpoint is in; the file follows it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "controlplane/service/blob_files.h"
#include "controlplane/service/checkpoint_index.h"

namespace controlplane::service {

class CheckpointFiles {
 public:
  explicit CheckpointFiles(std::string data_dir) : blobs_(std::move(data_dir) + "/checkpoints") {}

  Status AppendChunk(const CheckpointBlob& c, int64_t offset, const std::string& data) const {
    return blobs_.WriteAt(PartName(c), offset, data);
  }
  // Size and SHA-256 of the part file.
  using Digest = BlobFiles::Digest;
  Result<Digest> DigestPart(const CheckpointBlob& c) const { return blobs_.DigestOf(PartName(c)); }
  Status Publish(const CheckpointBlob& c) const {
    return blobs_.Commit(PartName(c), BlobName(c), c.bytes);
  }
  // The committed blob; not_found without one, internal when its size is not the row's.
  Result<std::shared_ptr<BlobReader>> Open(const CheckpointBlob& c) const;
  // Removes the part or committed file; missing files are fine.
  void Remove(const CheckpointBlob& c) const {
    blobs_.Remove(PartName(c));
    blobs_.Remove(BlobName(c));
  }

 private:
  static std::string Name(const CheckpointBlob& c, const char* ext) {
    return "tenant-" + std::to_string(c.tenant_id) + "/job-" + std::to_string(c.job_id) + "/" +
           std::to_string(c.id) + ext;
  }
  static std::string PartName(const CheckpointBlob& c) { return Name(c, ".part"); }
  static std::string BlobName(const CheckpointBlob& c) { return Name(c, ".ckpt"); }
  BlobFiles blobs_;
};

}  // namespace controlplane::service
