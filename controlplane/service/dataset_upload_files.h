// The bytes of dataset uploads (OCI images included) on the server's own disk (blob_files.h
// holds the discipline):
//   <data-dir>/dataset-uploads/<dataset id>.hdf5   0600, the server's (the name is historical: a
//                                                  LeRobot or OCI upload keeps its tar there too)
// never under the dataset root, so no job reads them there; an import job's agent fetches them
// over HTTP (dataset_uploads.h). The dataset row's received_bytes says how many bytes count; the
// file follows it. An upload has no part name: it is read where it was written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "controlplane/service/blob_files.h"

namespace controlplane::service {

class DatasetUploadFiles {
 public:
  explicit DatasetUploadFiles(std::string data_dir)
      : blobs_(std::move(data_dir) + "/dataset-uploads") {}

  const std::string& root() const { return blobs_.root(); }
  std::string PathOf(int64_t dataset_id) const { return blobs_.PathOf(Name(dataset_id)); }

  // Writes `data` at `offset` of upload `id`, dropping anything the file holds past `offset`.
  Status Write(int64_t id, int64_t offset, const std::string& data) const {
    return blobs_.WriteAt(Name(id), offset, data);
  }
  // Up to n bytes from offset (fewer at the end of the file).
  Result<std::string> Read(int64_t id, int64_t offset, size_t n) const;
  using Digest = BlobFiles::Digest;
  // Size and SHA-256 of the first `bytes` bytes held (what the row counts); a missing file is
  // empty.
  Result<Digest> DigestOf(int64_t id, int64_t bytes) const {
    return blobs_.DigestOf(Name(id), bytes);
  }
  // The whole upload for reading; not_found when it is missing or shorter than `bytes`.
  Result<std::shared_ptr<BlobReader>> Open(int64_t id, int64_t bytes) const;
  // Removes the upload's file; a missing one is fine.
  void Remove(int64_t id) const { blobs_.Remove(Name(id)); }
  // Dataset ids of every upload file present (names that are not "<id>.hdf5" are ignored).
  std::vector<int64_t> List() const;

 private:
  static std::string Name(int64_t id) { return std::to_string(id) + ".hdf5"; }
  BlobFiles blobs_;
};

}  // namespace controlplane::service
