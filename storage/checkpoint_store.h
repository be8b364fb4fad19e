// CheckpointStore: where finished checkpoint files go so that any node can get them back.
//
// One interface, two backends:
//   - DirCheckpointStore (checkpoint_dir_store.h): a directory, on local disk or on a shared file
//     system mounted on every node. Files are written atomically (temp + fsync + rename).
//   - HttpCheckpointStore (checkpoint_http_store.h): the server's blob store over HTTP (chunked,
//     checksummed per chunk, resumable, committed with the whole file's SHA-256).
//
// Contract shared by both: Put either makes the checkpoint listed whole or not at all (a killed
// or failed Put is never listed); List shows committed checkpoints only; Get writes the file
// atomically to a local path and verifies its SHA-256 before renaming it into place.
//
// The store never opens the caller's path itself: Put takes a CheckpointSource, a file already
// opened safely (checkpoint_source.h), because the file to upload is written by tenant code.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/checkpoint_source.h"

namespace storage {

struct CheckpointInfo {
  int64_t id = 0;      // unique within the store (the server's checkpoint id; the step in a dir)
  int64_t job_id = 0;  // the key the checkpoint is filed under
  int64_t step = 0;
  int64_t bytes = 0;
  std::string sha256;                                 // lower-case hex of the whole file
  nlohmann::json metrics = nlohmann::json::object();  // e.g. {"loss": 0.31}
  int64_t created_ms = 0;
};

class CheckpointStore {
 public:
  virtual ~CheckpointStore() = default;
  // Files the whole of `file` under `job_id` with its step and metrics (a JSON object of numbers).
  virtual common::Result<CheckpointInfo> Put(int64_t job_id, int64_t step,
                                             const nlohmann::json& metrics,
                                             CheckpointSource& file) = 0;
  // Committed checkpoints of `job_id`, ascending by step.
  virtual common::Result<std::vector<CheckpointInfo>> List(int64_t job_id) = 0;
  // Writes checkpoint `id` of `job_id` to `local_path` (atomically, verified); not_found when the
  // store does not hold it.
  virtual common::Result<CheckpointInfo> Get(int64_t job_id, int64_t id,
                                             const std::string& local_path) = 0;
  virtual common::Status Delete(int64_t job_id, int64_t id) = 0;
};

// Largest checkpoint either backend accepts (the server has its own, usually smaller, flag).
inline constexpr int64_t kMaxCheckpointBytes = int64_t{64} << 30;

}  // namespace storage
