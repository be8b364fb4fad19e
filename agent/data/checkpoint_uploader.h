// CheckpointUploader: copies the checkpoints jobs report writing into a CheckpointStore (the
// server's blob store), in the background, so a job restarted on another node finds them.
//
// Jobs post {"type":"checkpoint","step","path",...} to the local API; the path is tenant input.
// Only a regular file directly inside that job's own checkpoint directory
// (<data-dir>/checkpoints/job-<id>/) is read, opened without following links and bounded in size
// (storage/checkpoint_source.h); anything else is refused and logged. The metrics filed with a
// checkpoint are the numbers of the job's step event at the same step (or the event's own
// "metrics" object), so the server's retention can keep the best one.
//
// One worker thread; a newer checkpoint of a job replaces an older one still waiting, and the
// queue holds at most `max_pending` checkpoints (the oldest is dropped past it). The file is opened
// when its upload starts; the engine may have pruned it by then, which is logged and skipped.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/checkpoint_store.h"

namespace agent {

struct CheckpointUploaderOptions {
  std::string checkpoints_root;  // <data-dir>/checkpoints
  int64_t max_bytes = int64_t{16} << 30;
  size_t max_pending = 64;
};

class CheckpointUploader {
 public:
  // `store` must outlive the uploader.
  CheckpointUploader(CheckpointUploaderOptions options, storage::CheckpointStore* store);
  ~CheckpointUploader();  // stops after the upload in flight; pending ones are dropped
  CheckpointUploader(const CheckpointUploader&) = delete;
  CheckpointUploader& operator=(const CheckpointUploader&) = delete;

  // Every event a job posted (already shaped as an object with a string "type").
  void Observe(int64_t job_id, const nlohmann::json& event);
  // Uploads the file now, on the caller's thread (what the worker does for each queued one).
  common::Status UploadNow(int64_t job_id, int64_t step, const std::string& path,
                           const nlohmann::json& metrics);

  // For tests: true once nothing is queued or in flight, false after `timeout`.
  bool WaitIdle(std::chrono::milliseconds timeout);
  uint64_t uploaded() const;
  uint64_t failed() const;

 private:
  struct Pending {
    int64_t job_id = 0;
    int64_t step = 0;
    std::string path;
    nlohmann::json metrics;
  };
  void Run();

  const CheckpointUploaderOptions options_;
  storage::CheckpointStore* const store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  std::map<int64_t, nlohmann::json> last_step_;  // job -> its latest step event
  bool busy_ = false;
  bool stop_ = false;
  uint64_t uploaded_ = 0;
  uint64_t failed_ = 0;
  std::thread worker_;
};

// The numbers of a step event worth filing with a checkpoint: finite numbers under metric names
// the server accepts (a-z, 0-9, '_'), at most 32, "step" and "steps" left out.
nlohmann::json CheckpointMetrics(const nlohmann::json& event);

}  // namespace agent
