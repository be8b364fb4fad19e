// Node and per-job process series, read from /proc each time Prometheus scrapes the agent:
//
//   NodeCollector (public: names no job and no tenant)
//   embody_node_cpu_utilization_ratio      busy share of all CPUs since the previous reading
//   embody_node_memory_total_bytes         MemTotal
//   embody_node_memory_used_bytes          MemTotal - MemAvailable
//   JobProcessCollector (for the scraper holding the metrics secret only: agent_metrics.h)
//   embody_job_process_cpu_seconds_total   {job,tenant} CPU time of the job's process tree
//   embody_job_process_resident_memory_bytes {job,tenant} summed RSS of the tree
//
// CPU utilisation is a ratio of /proc/stat deltas between readings at least kMinCpuInterval
// apart (closer scrapes get the previous ratio, so two Prometheus servers scraping a second
// apart do not see noise); the first reading covers the time since boot.
//
// A job's CPU time counts each live process's own time plus the time of children it has waited
// for (cutime/cstime), so a rank that exits and is reaped by mpirun keeps its seconds in the sum:
// the counter does not fall when short-lived processes come and go. Resident memory double counts
// pages shared between processes, as `ps` does.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "agent/sandbox/process_tree.h"

namespace agent {

struct CpuTimes {
  uint64_t busy = 0;   // ticks not idle and not waiting for I/O
  uint64_t total = 0;  // all ticks (guest time is already inside user/nice)
};
// The aggregate "cpu " line of a /proc/stat text; nullopt when absent or malformed.
std::optional<CpuTimes> ParseCpuTimes(const std::string& proc_stat);
// Busy share between two readings, in [0, 1]; 0 when no time passed.
double CpuUtilization(const CpuTimes& before, const CpuTimes& after);

struct MemoryUse {
  int64_t total_bytes = 0;
  int64_t used_bytes = 0;
};
// From /proc/meminfo: MemTotal - MemAvailable (MemFree + Buffers + Cached on kernels before 3.14).
std::optional<MemoryUse> ParseMemoryUse(const std::string& meminfo);

struct ProcessUsage {
  double cpu_seconds = 0;
  int64_t resident_bytes = 0;
};
// Sums over the processes of `tree` found in `table`.
ProcessUsage SumUsage(const std::vector<ProcessEntry>& table, const std::vector<ProcessId>& tree,
                      long ticks_per_second, long page_bytes);

// A running job's launcher, the root of the tree whose use is reported.
struct JobRoot {
  int64_t job_id = 0;
  std::string tenant;
  pid_t pid = 0;  // leader of the job's session (mpirun)
};
using JobRootsFn = std::function<std::vector<JobRoot>()>;

class NodeCollector : public prometheus::Collectable {
 public:
  static constexpr std::chrono::milliseconds kMinCpuInterval{1000};

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  double CpuRatio() const;

  mutable std::mutex mu_;  // guards the CPU reading below
  mutable std::optional<CpuTimes> last_cpu_;
  mutable std::chrono::steady_clock::time_point last_cpu_at_;
  mutable double last_ratio_ = 0;
};

class JobProcessCollector : public prometheus::Collectable {
 public:
  explicit JobProcessCollector(JobRootsFn jobs);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const JobRootsFn jobs_;
  const long ticks_per_second_;
  const long page_bytes_;
};

}  // namespace agent
