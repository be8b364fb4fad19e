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

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
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
  // `base` as it was built (nothing taken out) with `extra`, a job not in it, in its place:
  // what PendingQueue(pending with extra) builds, without sorting again.
  PendingQueue(const PendingQueue& base, const PendingJob& extra);

  const std::vector<PendingJob>& jobs() const { return jobs_; }
  const std::vector<Run>& runs() const { return runs_; }
  const std::vector<Level>& levels() const { return levels_; }
  bool taken(size_t i) const { return taken_[i] != 0; }
  // The shapes of the queued jobs of a known slot type, ascending, and how many of each are
  // left (0: none); shape_of(i): job i's, as an index into them, -1 for an unknown slot type.
  const std::vector<Shape>& shapes() const { return shape_list_; }
  const std::vector<int64_t>& shapes_left() const { return shapes_left_; }
  int shape_of(size_t i) const { return shape_of_[i]; }
  size_t size() const { return left_; }

  // The job with this id still in the queue; null when it is not (or no longer).
  const PendingJob* Find(int64_t job_id) const;
  // Takes a job out; no-op when it is not in the queue.
  void Take(int64_t job_id);
  // The jobs left, in order.
  std::vector<PendingJob> Left() const;

  // Which jobs are taken out, by index into jobs(): to put a queue back where it was.
  const std::vector<char>& taken_marks() const { return taken_; }
  // Takes out what `marks` (taken_marks() of `base`) says, every other job back in; for a queue
  // built from `base` and one extra job (above), which stays in.
  void SetTaken(const std::vector<char>& marks, const PendingQueue& base);

  static Shape ShapeOf(const PendingJob& job);

 private:
  // runs_, levels_, run_of_ and the shapes from jobs_ in order, nothing taken out.
  void Group();
  // The run heads, shapes left and the count left from taken_.
  void Recount();

  std::vector<PendingJob> jobs_;
  std::vector<char> taken_;
  std::vector<Run> runs_;
  std::vector<size_t> run_of_;  // job index -> run index
  std::vector<Level> levels_;
  // Job index by id, by id: a sorted vector copies and grows by one job without rehashing.
  std::vector<std::pair<int64_t, size_t>> index_;
  size_t extra_at_ = 0;  // with an extra job (the constructor above): its index; else jobs_.size()
  std::vector<Shape> shape_list_;
  std::vector<int64_t> shapes_left_;  // parallel to shape_list_
  std::vector<int> shape_of_;         // job index -> shape_list_ index, or -1
  size_t left_ = 0;
};

}  // namespace controlplane::service
