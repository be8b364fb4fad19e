// The index of checkpoints in the server's blob store: one row per upload in the checkpoints
// table (state 'uploading' until its commit verified it, then 'ready'). The rows jobs report as
// written on a node's own disk (state 'local', EventStore::AddCheckpoint) are not blob rows and
// never returned here. The files themselves are service/checkpoint_files.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace controlplane::service {

struct CheckpointBlob {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t tenant_id = 0;
  int64_t step = 0;
  int64_t bytes = 0;           // declared at the start of the upload
  int64_t received_bytes = 0;  // stored so far
  std::string sha256;          // declared, lower-case hex
  std::string state;           // "uploading" | "ready"
  nlohmann::json metrics = nlohmann::json::object();
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

class CheckpointIndex {
 public:
  virtual ~CheckpointIndex() = default;
  // A new upload (state uploading, nothing received); returns its id.
  virtual common::Result<int64_t> InsertUpload(const CheckpointBlob& c, int64_t now_ms) = 0;
  // for_update locks the row until the unit of work ends (chunks of one upload are serialised).
  virtual common::Result<std::optional<CheckpointBlob>> Get(int64_t id, bool for_update) = 0;
  virtual common::Status SetReceived(int64_t id, int64_t received_bytes, int64_t now_ms) = 0;
  virtual common::Status MarkReady(int64_t id, int64_t now_ms) = 0;
  virtual common::Status Delete(int64_t id) = 0;
  // Ready checkpoints of a job, ascending by step (then id).
  virtual common::Result<std::vector<CheckpointBlob>> ListReady(int64_t job_id) = 0;
  virtual common::Result<std::optional<CheckpointBlob>> LatestReady(int64_t job_id) = 0;
  // Uploads of a job, uploading or ready.
  virtual common::Result<int64_t> CountForJob(int64_t job_id) = 0;
  // Bytes a tenant holds or has announced: ready rows and uploads in progress (declared size).
  virtual common::Result<int64_t> BytesForTenant(int64_t tenant_id) = 0;
  // Uploads not touched since `before_ms`, oldest first, locked (others' locked rows skipped).
  virtual common::Result<std::vector<CheckpointBlob>> StaleUploads(int64_t before_ms,
                                                                   int limit) = 0;
};

}  // namespace controlplane::service
