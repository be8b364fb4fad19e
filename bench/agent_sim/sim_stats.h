// Counters the simulator's threads share: latency samples per named series and errors by kind.
// Every thread appends under one mutex; at a thousand heartbeats a second that is far below what
// would make this process the bottleneck (the simulator reports its own CPU to show it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace bench {

struct Percentiles {
  size_t count = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
};

class SimStats {
 public:
  void Sample(const std::string& series, double seconds);
  void Error(const std::string& kind);
  Percentiles Of(const std::string& series) const;
  std::map<std::string, int64_t> Errors() const;
  int64_t ErrorCount(const std::string& prefix) const;  // errors whose kind starts with `prefix`

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<double>> samples_;
  std::map<std::string, int64_t> errors_;
};

}  // namespace bench
