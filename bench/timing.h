// Small pieces the launch benchmarks share (jobs_bench, byo_bench): the wall clock in ns, which
// job scripts print too (`date +%s%N`, Python's time.time_ns()), and a nearest-rank percentile.
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace bench {

inline int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// p in [0, 1]; 0 for no values.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace bench
