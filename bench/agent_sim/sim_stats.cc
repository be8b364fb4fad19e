#include "bench/agent_sim/sim_stats.h"

#include <algorithm>

namespace bench {

void SimStats::Sample(const std::string& series, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  samples_[series].push_back(seconds);
}

void SimStats::Error(const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  ++errors_[kind];
}

Percentiles SimStats::Of(const std::string& series) const {
  std::vector<double> v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = samples_.find(series);
    if (it != samples_.end()) v = it->second;
  }
  Percentiles p;
  p.count = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return 1e3 * v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
  };
  p.p50_ms = at(0.5);
  p.p99_ms = at(0.99);
  p.max_ms = 1e3 * v.back();
  return p;
}

std::map<std::string, int64_t> SimStats::Errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

int64_t SimStats::ErrorCount(const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [kind, count] : errors_) {
    if (kind.rfind(prefix, 0) == 0) n += count;
  }
  return n;
}

}  // namespace bench
