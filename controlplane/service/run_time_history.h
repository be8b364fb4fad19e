// What jobs ran for against the time limit they asked for: the forecaster's expected run time of
// a job the planner cannot predict (forecast_service.h). Users' limits are upper bounds, often
// loose, and a forward run that lets every job hold its slots to its limit predicts starts late
// by the sum of the slack of every job ahead; history corrects that (as Tsafrir, Etsion and
// Feitelson, "Backfilling using system-generated predictions rather than user runtime
// estimates", 2007, do per user).
//
// One ratio for the whole server: the mean of actual run time / time limit over the last
// `window` jobs that succeeded (failures and cancels say nothing of how long a job needs). None
// until `min_samples` are in. Thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace controlplane::service {

class RunTimeHistory {
 public:
  explicit RunTimeHistory(size_t window = 512, size_t min_samples = 20)
      : window_(window), min_samples_(min_samples) {}

  // A succeeded job that ran `run_seconds` under a limit of `limit_seconds`; ignored unless both
  // are positive. Ratios above 1 (a job past its limit by the scheduler's lag) count as 1.
  void Add(double run_seconds, double limit_seconds);
  // Mean of the window's ratios, in (0, 1]; nullopt with fewer than min_samples.
  std::optional<double> Ratio() const;

 private:
  const size_t window_;
  const size_t min_samples_;
  mutable std::mutex mu_;
  std::deque<double> ratios_;
  double sum_ = 0;
};

}  // namespace controlplane::service
