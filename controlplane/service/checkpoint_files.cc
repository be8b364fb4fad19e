#include "controlplane/service/checkpoint_files.h"

namespace controlplane::service {

Result<std::shared_ptr<BlobReader>> CheckpointFiles::Open(const CheckpointBlob& c) const {
  auto reader = blobs_.Open(BlobName(c));
  if (!reader.ok()) {
    if (reader.status().code() != common::Code::kNotFound) return reader.status();
    return common::NotFound("checkpoint " + std::to_string(c.id) + " has no data");
  }
  if ((*reader)->size() != c.bytes) {
    return common::Internal("checkpoint " + std::to_string(c.id) + " data has the wrong size");
  }
  return reader;
}

}  // namespace controlplane::service
