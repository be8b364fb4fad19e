// DirCheckpointStore: checkpoints in a directory tree, on local disk or on a shared file system
// mounted at the same place on every node.
//
//   <root>/job-<job_id>/step-<step>.ckpt   the file
//   <root>/job-<job_id>/step-<step>.json   {"step","bytes","sha256","metrics","created_ms"}
//
// A checkpoint's id is its step. Put writes the data file, then the metadata file, each atomically
// (common/env.h); the metadata file's presence is the commit: List counts a step only when both
// exist and agree on the size, so a Put killed at any point is never listed. Put of a step that
// exists replaces it. Thread-safe as far as the file system is (no shared state in the object).
#pragma once

#include <string>

#include "storage/checkpoint_store.h"

namespace storage {

class DirCheckpointStore : public CheckpointStore {
 public:
  explicit DirCheckpointStore(std::string root) : root_(std::move(root)) {}

  common::Result<CheckpointInfo> Put(int64_t job_id, int64_t step, const nlohmann::json& metrics,
                                     CheckpointSource& file) override;
  common::Result<std::vector<CheckpointInfo>> List(int64_t job_id) override;
  common::Result<CheckpointInfo> Get(int64_t job_id, int64_t id,
                                     const std::string& local_path) override;
  common::Status Delete(int64_t job_id, int64_t id) override;

  std::string JobDir(int64_t job_id) const;

 private:
  common::Result<CheckpointInfo> ReadInfo(int64_t job_id, int64_t step) const;
  std::string root_;
};

// Copies `file` through an atomic file (common/env.h) to `path`, returning the SHA-256 of what was written.
common::Result<std::string> CopyAtomically(CheckpointSource& file, const std::string& path);

}  // namespace storage
