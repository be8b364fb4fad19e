#include "controlplane/service/dataset_upload_files.h"

#include <algorithm>

#include "common/parse_int.h"

namespace controlplane::service {

Result<std::string> DatasetUploadFiles::Read(int64_t id, int64_t offset, size_t n) const {
  EMBODY_ASSIGN_OR_RETURN(reader, blobs_.Open(Name(id)));
  return reader->Read(offset, n);
}

Result<std::shared_ptr<BlobReader>> DatasetUploadFiles::Open(int64_t id, int64_t bytes) const {
  auto reader = blobs_.Open(Name(id), bytes);
  const std::string what = "the upload of dataset " + std::to_string(id);
  if (!reader.ok()) {
    if (reader.status().code() != common::Code::kNotFound) return reader.status();
    return common::NotFound(what + " is gone");
  }
  if ((*reader)->size() < bytes) return common::NotFound(what + " is incomplete");
  return reader;
}

std::vector<int64_t> DatasetUploadFiles::List() const {
  std::vector<int64_t> ids;
  for (const std::string& stem : blobs_.List("", ".hdf5")) {
    auto id = common::ParseInt64(stem, 1);
    if (id.ok()) ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace controlplane::service
