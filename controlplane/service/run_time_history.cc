#include "controlplane/service/run_time_history.h"

#include <algorithm>

namespace controlplane::service {

void RunTimeHistory::Add(double run_seconds, double limit_seconds) {
  if (!(run_seconds > 0) || !(limit_seconds > 0)) return;
  const double ratio = std::min(1.0, run_seconds / limit_seconds);
  std::lock_guard<std::mutex> lock(mu_);
  ratios_.push_back(ratio);
  sum_ += ratio;
  while (ratios_.size() > window_) {
    sum_ -= ratios_.front();
    ratios_.pop_front();
  }
}

std::optional<double> RunTimeHistory::Ratio() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (ratios_.empty() || ratios_.size() < min_samples_) return std::nullopt;
  return std::clamp(sum_ / static_cast<double>(ratios_.size()), 1e-3, 1.0);
}

}  // namespace controlplane::service
