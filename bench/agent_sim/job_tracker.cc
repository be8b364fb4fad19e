#include "bench/agent_sim/job_tracker.h"

#include <algorithm>

namespace bench {

void JobTracker::Submitted(int64_t job_id, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[job_id].submitted = now;
}

void JobTracker::Launched(int64_t job_id, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  ++launches_;
  Times& t = jobs_[job_id];
  if (t.launched < 0) t.launched = now;
}

void JobTracker::Finished(int64_t job_id, int exit_code, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  Times& t = jobs_[job_id];
  if (t.finished < 0) ++finished_;
  t.finished = now;
  t.exit_code = exit_code;
}

int64_t JobTracker::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

JobTracker::Totals JobTracker::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  Totals t;
  t.launches = launches_;
  for (const auto& [id, j] : jobs_) {
    if (j.submitted >= 0) {
      ++t.submitted;
      t.first_submit = std::min(t.first_submit, j.submitted);
    }
    if (j.launched >= 0) {
      ++t.launched;
      t.last_launch = std::max(t.last_launch, j.launched);
      if (j.submitted >= 0) t.submit_to_launch_s.push_back(j.launched - j.submitted);
    }
    if (j.finished >= 0) {
      ++t.finished;
      if (j.exit_code != 0) ++t.finished_nonzero;
      t.last_finish = std::max(t.last_finish, j.finished);
    }
  }
  return t;
}

}  // namespace bench
