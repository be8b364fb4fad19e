// The pending jobs in the scheduler's order, kept across decisions (pending_queue.h).
#include "controlplane/service/pending_queue.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace controlplane::service {

PendingQueue::Shape PendingQueue::ShapeOf(const PendingJob& job) {
  return {SlotKindOf(job.resources.slot_type), job.resources.SlotsPerNode(), job.resources.nodes,
          job.time_limit_seconds};
}

namespace {

bool Before(const PendingJob& x, const PendingJob& y) {
  return std::tuple(-x.priority, x.tenant_id, x.submit_ms, x.job_id) <
         std::tuple(-y.priority, y.tenant_id, y.submit_ms, y.job_id);
}

}  // namespace

PendingQueue::PendingQueue(const std::vector<PendingJob>& pending) : jobs_(pending) {
  std::sort(jobs_.begin(), jobs_.end(), Before);
  extra_at_ = jobs_.size();
  index_.reserve(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i) index_.push_back({jobs_[i].job_id, i});
  std::sort(index_.begin(), index_.end());
  // An id queued twice: its last place, as a map written in order would keep.
  auto last = std::unique(index_.rbegin(), index_.rend(),
                          [](const auto& a, const auto& b) { return a.first == b.first; });
  index_.erase(index_.begin(), last.base());
  Group();
}

PendingQueue::PendingQueue(const PendingQueue& base, const PendingJob& extra) {
  const size_t at =
      std::upper_bound(base.jobs_.begin(), base.jobs_.end(), extra, Before) - base.jobs_.begin();
  jobs_.reserve(base.jobs_.size() + 1);
  jobs_.insert(jobs_.end(), base.jobs_.begin(), base.jobs_.begin() + at);
  jobs_.push_back(extra);
  jobs_.insert(jobs_.end(), base.jobs_.begin() + at, base.jobs_.end());
  extra_at_ = at;
  index_.reserve(base.index_.size() + 1);
  bool added = false;
  for (const auto& [id, i] : base.index_) {
    if (!added && extra.job_id < id) {
      index_.push_back({extra.job_id, at});
      added = true;
    }
    index_.push_back({id, i < at ? i : i + 1});
  }
  if (!added) index_.push_back({extra.job_id, at});
  Group();
}

void PendingQueue::Group() {
  taken_.assign(jobs_.size(), 0);
  run_of_.resize(jobs_.size());
  runs_.clear();
  levels_.clear();
  shape_list_.clear();
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const PendingJob& j = jobs_[i];
    const Shape shape = ShapeOf(j);
    if (std::get<0>(shape) >= 0) {  // few shapes: one search each, an insert when new
      auto known = std::lower_bound(shape_list_.begin(), shape_list_.end(), shape);
      if (known == shape_list_.end() || *known != shape) shape_list_.insert(known, shape);
    }
    const bool new_level = i == 0 || jobs_[i - 1].priority != j.priority;
    if (new_level || jobs_[i - 1].tenant_id != j.tenant_id) {
      if (new_level) levels_.push_back({runs_.size(), runs_.size()});
      runs_.push_back({i, i, i});
      levels_.back().end = runs_.size();
    }
    runs_.back().end = i + 1;
    run_of_[i] = runs_.size() - 1;
  }
  shape_of_.assign(jobs_.size(), -1);
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const Shape shape = ShapeOf(jobs_[i]);
    if (std::get<0>(shape) < 0) continue;
    shape_of_[i] = static_cast<int>(
        std::lower_bound(shape_list_.begin(), shape_list_.end(), shape) - shape_list_.begin());
  }
  Recount();
}

void PendingQueue::Recount() {
  shapes_left_.assign(shape_list_.size(), 0);
  left_ = 0;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (taken_[i]) continue;
    left_ += 1;
    if (shape_of_[i] >= 0) shapes_left_[shape_of_[i]] += 1;
  }
  for (Run& run : runs_) {
    run.head = run.begin;
    while (run.head < run.end && taken_[run.head]) ++run.head;
  }
}

void PendingQueue::SetTaken(const std::vector<char>& marks, const PendingQueue& base) {
  if (marks.size() + 1 != jobs_.size() || base.jobs_.size() != marks.size()) {
    throw std::invalid_argument("SetTaken: marks of another queue");
  }
  std::copy(marks.begin(), marks.begin() + extra_at_, taken_.begin());
  taken_[extra_at_] = 0;
  std::copy(marks.begin() + extra_at_, marks.end(), taken_.begin() + extra_at_ + 1);
  Recount();
}

const PendingJob* PendingQueue::Find(int64_t job_id) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), std::pair<int64_t, size_t>(job_id, 0));
  if (it == index_.end() || it->first != job_id || taken_[it->second]) return nullptr;
  return &jobs_[it->second];
}

void PendingQueue::Take(int64_t job_id) {
  auto it = std::lower_bound(index_.begin(), index_.end(), std::pair<int64_t, size_t>(job_id, 0));
  if (it == index_.end() || it->first != job_id || taken_[it->second]) return;
  const size_t i = it->second;
  taken_[i] = 1;
  left_ -= 1;
  if (shape_of_[i] >= 0) shapes_left_[shape_of_[i]] -= 1;
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
