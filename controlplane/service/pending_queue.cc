// The pending jobs in the scheduler's order, kept across decisions (pending_queue.h).
#include "controlplane/service/pending_queue.h"

#include <algorithm>

namespace controlplane::service {

PendingQueue::Shape PendingQueue::ShapeOf(const PendingJob& job) {
  return {SlotKindOf(job.resources.slot_type), job.resources.SlotsPerNode(), job.resources.nodes,
          job.time_limit_seconds};
}

PendingQueue::PendingQueue(const std::vector<PendingJob>& pending) : jobs_(pending) {
  std::sort(jobs_.begin(), jobs_.end(), [](const PendingJob& x, const PendingJob& y) {
    return std::tuple(-x.priority, x.tenant_id, x.submit_ms, x.job_id) <
           std::tuple(-y.priority, y.tenant_id, y.submit_ms, y.job_id);
  });
  taken_.assign(jobs_.size(), 0);
  run_of_.resize(jobs_.size());
  left_ = jobs_.size();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const PendingJob& j = jobs_[i];
    index_[j.job_id] = i;
    if (std::get<0>(ShapeOf(j)) >= 0) shapes_[ShapeOf(j)] += 1;
    const bool new_level = i == 0 || jobs_[i - 1].priority != j.priority;
    if (new_level || jobs_[i - 1].tenant_id != j.tenant_id) {
      if (new_level) levels_.push_back({runs_.size(), runs_.size()});
      runs_.push_back({i, i, i});
      levels_.back().end = runs_.size();
    }
    runs_.back().end = i + 1;
    run_of_[i] = runs_.size() - 1;
  }
}

const PendingJob* PendingQueue::Find(int64_t job_id) const {
  auto it = index_.find(job_id);
  if (it == index_.end() || taken_[it->second]) return nullptr;
  return &jobs_[it->second];
}

void PendingQueue::Take(int64_t job_id) {
  auto it = index_.find(job_id);
  if (it == index_.end() || taken_[it->second]) return;
  const size_t i = it->second;
  taken_[i] = 1;
  left_ -= 1;
  const Shape shape = ShapeOf(jobs_[i]);
  if (std::get<0>(shape) >= 0) {
    auto s = shapes_.find(shape);
    if (--s->second == 0) shapes_.erase(s);
  }
  Run& run = runs_[run_of_[i]];
  while (run.head < run.end && taken_[run.head]) ++run.head;
}

std::vector<PendingJob> PendingQueue::Left() const {
  std::vector<PendingJob> out;
  out.reserve(left_);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (!taken_[i]) out.push_back(jobs_[i]);
  }
  return out;
}

}  // namespace controlplane::service
