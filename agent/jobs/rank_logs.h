// Per-rank log capture and the bookkeeping of what the server already has.
//
// Open MPI writes each rank's output to <job>/ranks/rank.N/{stdout,stderr}. The agent folds the
// two streams of rank N into one file, <logs>/rank-N.log, whole lines at a time in the order it
// sees them (so a line is never cut in half by a line of the other stream), and ships that file;
// mpirun's own output, <logs>/launcher.log, is shipped as rank -1. The server sees one byte stream
// per (job, rank) and the offset of every chunk.
//
// <job> belongs to the job (tenant code, another uid), <logs> to the agent. The agent opens
// nothing under <job> through a symbolic link, opens only regular files (never a FIFO it would
// block on) and, given the job's uid, only files that uid owns: a job cannot make the agent
// read (and ship to it) a file it could not read itself.
//
// Shipping is two-phase: NextBatch() reads new bytes from the acknowledged offsets without moving
// them; Commit() moves them once a heartbeat carrying the batch succeeded, so a failed heartbeat
// re-sends the same bytes. A batch holds at most `max_batch_bytes` and kMaxBatchChunks chunks,
// shared fairly between files.
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/agent_protocol.h"

namespace agent {

// How much of a job's rank output is kept: a job is tenant code, and one that writes logs as
// fast as it can must not fill the node's disk or the server's log store. Past `bytes_per_s`
// (with `burst_bytes` of slack) output is dropped and a marker line says how much; past
// `total_bytes` per attempt every further byte is dropped after one marker line. A real job
// never meets the defaults.
struct RankLogCaps {
  int64_t bytes_per_s = 16 << 20;
  int64_t burst_bytes = 64 << 20;
  int64_t total_bytes = int64_t{4} << 30;
};

class RankLogs {
 public:
  static constexpr size_t kDefaultBatchBytes = 256 * 1024;
  // Chunks in one batch at most (the server refuses a heartbeat of more than 10,000 reports);
  // when more files have new bytes, successive batches take them in turn.
  static constexpr size_t kMaxBatchChunks = 512;
  // A line longer than this is folded in pieces rather than waiting for its newline.
  static constexpr size_t kMaxPartialLine = 64 * 1024;

  using Caps = RankLogCaps;
  explicit RankLogs(size_t max_batch_bytes = kDefaultBatchBytes, Caps caps = Caps());
  // For jobs added from now on.
  void SetCaps(Caps caps);

  // Starts tracking a job whose Open MPI output lives in `job_dir`/ranks, folding it into
  // `log_dir`; `owner`: the job's uid, when it has one of its own.
  // `attempt`: the job's attempt, which every chunk names (api::LogChunk::attempt): each
  // attempt's logs are its own on the server, from offset 0 (its files in `log_dir` start empty).
  // `base_bytes`: bytes of each rank's log (-1: the launcher) the server already holds for this
  // attempt, which this run's bytes follow: a job put back in the queue without a new attempt
  // (preempted) runs again under the same attempt (api::Command::log_bytes).
  // `ranks`: the job's world size; only rank.0 … rank.(ranks-1) are its ranks' output, whatever
  // else the job makes there (a job is tenant code: 20,000 rank directories must not become
  // 20,000 logs to ship).
  void AddJob(int64_t job_id, const std::string& job_dir, const std::string& log_dir, int ranks,
              std::optional<uid_t> owner = std::nullopt, int attempt = 0,
              std::map<int, int64_t> base_bytes = {});
  // Folds new rank output into the rank-N.log files: whole lines, or everything when `final`
  // (the job's processes are gone, so no line will be completed later).
  void Collect(int64_t job_id, bool final);
  void CollectAll();
  // The job ended and a final Collect was done: once all its bytes are acknowledged it is dropped.
  void MarkFinished(int64_t job_id);

  struct Batch {
    std::vector<api::LogChunk> chunks;
    // Finished jobs whose every remaining byte is in `chunks`.
    std::set<int64_t> complete_jobs;
  };
  Batch NextBatch();
  void Commit(const std::vector<api::LogChunk>& shipped);

  bool Tracking(int64_t job_id) const;
  // The first failure to write the job's folded logs ("" : none), e.g. a full disk: the bytes
  // not written wait in the job's own files and are folded once there is room.
  std::string WriteError(int64_t job_id) const;
  // Path of the combined log of `rank` (-1: launcher) in a job's log directory.
  static std::string RankLogPath(const std::string& log_dir, int rank);

 private:
  struct Source {
    std::string path;  // relative to the job directory
    int64_t consumed = 0;
  };
  struct RankFile {
    std::string path;
    int64_t acked = 0;             // of the local file
    int64_t base = 0;              // the server's offset of the local file's first byte
    std::vector<Source> sources;  // empty for the launcher log
  };
  struct Job {
    std::string dir;
    std::string log_dir;
    std::optional<uid_t> owner;
    int world_size = 1;
    bool finished = false;
    std::map<int, RankFile> ranks;
    int attempt = 0;
    std::map<int, int64_t> base_bytes;
    std::string write_error;
    int64_t folded = 0;      // bytes of rank output kept, this attempt
    double allowance = 0;    // bytes the rate cap lets through now
    int64_t refilled_ms = 0;  // when `allowance` was last topped up
    bool total_reached = false;
  };

  void DiscoverRanks(Job* job);
  static int64_t BaseOf(const Job& job, int rank);
  // Both return 0 or the errno of a failed write to `dest`.
  int FoldSource(const Job& job, const std::string& dest, Source* src, bool final,
                 int64_t* budget, int64_t* dropped);
  // `budget`: bytes that may still be kept; what is over it is skipped and added to `dropped`.
  static int FoldFrom(int fd, int64_t size, const std::string& dest, Source* src, bool final,
                      int64_t* budget, int64_t* dropped);

  const size_t max_batch_bytes_;
  Caps caps_;
  mutable std::mutex mu_;
  size_t batch_turn_ = 0;  // where the next batch starts when more files wait than it holds
  std::map<int64_t, Job> jobs_;
};

}  // namespace agent
