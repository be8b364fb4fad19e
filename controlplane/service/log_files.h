// Job logs on the server's disk, one set per attempt of a job:
// <data-dir>/logs/job-<id>/attempt-<n>/rank-<r>.log (launcher.log for the launcher, rank -1).
// Agents send each rank's log as chunks with byte offsets (from 0 in every attempt); appending is
// idempotent so a retried heartbeat never duplicates bytes.
//
// LogMerger turns several growing rank logs into one stream of whole lines, each prefixed
// "[rank N] " or "[launcher] ", for GET /v1/jobs/{id}/logs without `rank`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

class LogFiles {
 public:
  explicit LogFiles(std::string data_dir) : data_dir_(std::move(data_dir)) {}

  std::string PathFor(int64_t job_id, int attempt, int rank) const;
  // All of a job's logs, every attempt (retention).
  std::string JobDir(int64_t job_id) const;
  // Appends the part of `chunk` (of chunk.attempt, which must be set) beyond the file's current size; bytes before it were written
  // already (a retry). If the chunk starts past the end (lost bytes) it is appended anyway: a gap
  // in a log beats a stuck log. Returns the file's new size.
  Result<int64_t> Append(const api::LogChunk& chunk) const;
  // Up to `max_bytes` from `offset`; "" at or past the end or when the file does not exist.
  static Result<std::string> Read(const std::string& path, int64_t offset, size_t max_bytes);

 private:
  std::string data_dir_;
};

class LogMerger {
 public:
  // Reads what is new in each log; returns whole lines, prefixed. With `final`, also the last
  // partial line of each rank.
  Result<std::string> Poll(const std::vector<LogRecord>& logs, bool final);

 private:
  struct Cursor {
    int64_t offset = 0;
    std::string partial;
  };
  std::map<int, Cursor> cursors_;
};

std::string RankPrefix(int rank);

}  // namespace controlplane::service
