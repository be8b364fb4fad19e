// The bytes of dataset uploads on the server's own disk:
//   <data-dir>/dataset-uploads/<dataset id>.hdf5   0600, the server's (the name is historical: a
//                                                  LeRobot upload keeps its tar there too)
// never under the dataset root, so no job reads them there; an import job's agent fetches them
// over HTTP (dataset_uploads.h). The dataset row's received_bytes says how many bytes count; the
// file follows it. A chunk is written at its offset after cutting the file back to that offset, so
// bytes of an earlier attempt whose row update never committed cannot linger, then fdatasync'ed
// before the row says they are held (the same discipline as checkpoint_files.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "controlplane/service/checkpoint_files.h"

namespace controlplane::service {

class DatasetUploadFiles {
 public:
  explicit DatasetUploadFiles(std::string data_dir)
      : root_(std::move(data_dir) + "/dataset-uploads") {}

  const std::string& root() const { return root_; }
  std::string PathOf(int64_t dataset_id) const;

  // Writes `data` at `offset` of upload `id`, dropping anything the file holds past `offset`.
  Status Write(int64_t id, int64_t offset, const std::string& data) const;
  // Up to n bytes from offset (fewer at the end of the file).
  Result<std::string> Read(int64_t id, int64_t offset, size_t n) const;
  struct Digest {
    int64_t bytes = 0;
    std::string sha256;
  };
  // Size and SHA-256 of the first `bytes` bytes held (what the row counts); a missing file is
  // empty.
  Result<Digest> DigestOf(int64_t id, int64_t bytes) const;
  // The whole upload for reading; not_found when it is missing or shorter than `bytes`.
  Result<std::shared_ptr<BlobReader>> Open(int64_t id, int64_t bytes) const;
  // Removes the upload's file; a missing one is fine.
  void Remove(int64_t id) const;
  // Dataset ids of every upload file present (names that are not "<id>.hdf5" are ignored).
  std::vector<int64_t> List() const;

 private:
  std::string root_;
};

}  // namespace controlplane::service
