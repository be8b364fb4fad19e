// HandOverClock: how long the server takes to hand a job's slots to the next job, learned from
// what it sees. A forecast's forward run frees a job's slots at its expected end and starts the
// next job there at once; on the cluster the end must be reported (the head's heartbeat), a
// scheduling cycle must place the next job, and its launch must reach its agent and be started
// (the next heartbeat) before the server marks it RUNNING. A job behind a chain of jobs waits
// for every hand-over of the chain, so the forecaster adds the mean (forecast.h, handover_ms).
//
// A sample: a job starts (RUNNING) on nodes that a job ended on while it was waiting; the time
// from the last of those ends to the start. Starts on nodes that sat free since before the job
// was submitted, or that no ended job freed, say nothing of hand-overs and are not counted, nor
// are gaps over `max_gap_ms` (the nodes idled, held for a reservation or the queue was empty).
// The mean is over the last `window` samples; none until `min_samples` are in. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace controlplane::service {

class HandOverClock {
 public:
  explicit HandOverClock(size_t window = 256, size_t min_samples = 5,
                         int64_t max_gap_ms = 60'000)
      : window_(window), min_samples_(min_samples), max_gap_ms_(max_gap_ms) {}

  // A job that held slots on `node_ids` ended, as the server learned at `at_ms`.
  void Freed(const std::vector<int64_t>& node_ids, int64_t at_ms);
  // A job submitted at `submit_ms` started on `node_ids` at `at_ms`; the nodes' ends are used up.
  void Started(const std::vector<int64_t>& node_ids, int64_t submit_ms, int64_t at_ms);
  // Mean of the window's samples (ms); nullopt with fewer than min_samples.
  std::optional<int64_t> MeanMs() const;
  size_t samples() const;

 private:
  const size_t window_;
  const size_t min_samples_;
  const int64_t max_gap_ms_;
  mutable std::mutex mu_;
  std::unordered_map<int64_t, int64_t> freed_ms_;  // node -> its latest end not yet handed over
  std::deque<int64_t> samples_;
  int64_t sum_ = 0;
};

}  // namespace controlplane::service
