// PendingQueue: the pending jobs kept in the order the scheduler groups them (scheduler.h), for a
// caller that decides many times over a queue that only loses jobs: the forecaster's forward run
// (forecast.h), which decides once per expected end. A decision over it (ScheduleQueue) neither
// copies nor sorts the queue, and with the reasons off it stops where the rest of the queue can
// change nothing; both keep its cost per decision from growing with the queue's length.
//
// Order: priority (highest first), then tenant, then submit time, then id; each (priority,
// tenant) is a run, the runs of one priority a level. A job taken out (started) is only marked;
// runs skip marked jobs. Shapes counts the jobs left by what placing them asks for (slot kind,
// slots per node, nodes, time limit). Not thread-safe; a plain value otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "controlplane/service/scheduler.h"

namespace controlplane::service {

class PendingQueue {
 public:
  struct Run {
    size_t begin = 0, end = 0;  // into jobs()
    size_t head = 0;            // the first job not taken out, or end
  };
  struct Level {
    size_t begin = 0, end = 0;  // into runs()
  };
  using Shape = JobShape;

  PendingQueue() = default;
  explicit PendingQueue(const std::vector<PendingJob>& pending);

  const std::vector<PendingJob>& jobs() const { return jobs_; }
  const std::vector<Run>& runs() const { return runs_; }
  const std::vector<Level>& levels() const { return levels_; }
  bool taken(size_t i) const { return taken_[i] != 0; }
  // The jobs left of each shape; jobs of an unknown slot type are not counted.
  const std::map<Shape, int64_t>& shapes() const { return shapes_; }
  size_t size() const { return left_; }

  // The job with this id still in the queue; null when it is not (or no longer).
  const PendingJob* Find(int64_t job_id) const;
  // Takes a job out; no-op when it is not in the queue.
  void Take(int64_t job_id);
  // The jobs left, in order.
  std::vector<PendingJob> Left() const;

  static Shape ShapeOf(const PendingJob& job);

 private:
  std::vector<PendingJob> jobs_;
  std::vector<char> taken_;
  std::vector<Run> runs_;
  std::vector<size_t> run_of_;  // job index -> run index
  std::vector<Level> levels_;
  std::unordered_map<int64_t, size_t> index_;
  std::map<Shape, int64_t> shapes_;
  size_t left_ = 0;
};

}  // namespace controlplane::service
