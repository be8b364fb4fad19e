#include "agent/node/node_collector.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "agent/node/metric_families.h"
#include "common/file_util.h"

namespace agent {

std::optional<CpuTimes> ParseCpuTimes(const std::string& proc_stat) {
  std::istringstream in(proc_stat);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    // user nice system idle iowait irq softirq steal (guest, guest_nice are inside user, nice)
    uint64_t v[8] = {};
    int n = 0;
    while (n < 8 && fields >> v[n]) ++n;
    if (n < 4) return std::nullopt;
    CpuTimes t;
    for (int i = 0; i < n; ++i) t.total += v[i];
    t.busy = t.total - v[3] - v[4];
    return t;
  }
  return std::nullopt;
}

double CpuUtilization(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) return 0;
  double ratio = static_cast<double>(after.busy - before.busy) /
                 static_cast<double>(after.total - before.total);
  return ratio > 1 ? 1 : ratio;
}

std::optional<MemoryUse> ParseMemoryUse(const std::string& meminfo) {
  std::map<std::string, int64_t> kb;
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream value(line.substr(colon + 1));
    int64_t v = 0;
    if (value >> v) kb[line.substr(0, colon)] = v;
  }
  auto total = kb.find("MemTotal");
  if (total == kb.end()) return std::nullopt;
  int64_t available = 0;
  if (auto a = kb.find("MemAvailable"); a != kb.end()) {
    available = a->second;
  } else {
    available = kb["MemFree"] + kb["Buffers"] + kb["Cached"];
  }
  MemoryUse m;
  m.total_bytes = total->second * 1024;
  m.used_bytes = std::max<int64_t>(0, total->second - available) * 1024;
  return m;
}

ProcessUsage SumUsage(const std::vector<ProcessEntry>& table, const std::vector<ProcessId>& tree,
                      long ticks_per_second, long page_bytes) {
  std::map<pid_t, const ProcessEntry*> by_pid;
  for (const auto& p : table) by_pid[p.id.pid] = &p;
  uint64_t ticks = 0, pages = 0;
  for (const auto& id : tree) {
    auto it = by_pid.find(id.pid);
    if (it == by_pid.end() || !(it->second->id == id)) continue;
    const ProcessEntry& p = *it->second;
    ticks += p.utime + p.stime + p.cutime + p.cstime;
    pages += p.rss_pages;
  }
  ProcessUsage u;
  u.cpu_seconds = static_cast<double>(ticks) / static_cast<double>(ticks_per_second);
  u.resident_bytes = static_cast<int64_t>(pages) * page_bytes;
  return u;
}

double NodeCollector::CpuRatio() const {
  auto text = common::ReadFile("/proc/stat");
  std::optional<CpuTimes> now = text.ok() ? ParseCpuTimes(*text) : std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  if (!now) return last_ratio_;
  auto at = std::chrono::steady_clock::now();
  if (last_cpu_ && at - last_cpu_at_ < kMinCpuInterval) return last_ratio_;
  last_ratio_ = CpuUtilization(last_cpu_.value_or(CpuTimes{}), *now);
  last_cpu_ = now;
  last_cpu_at_ = at;
  return last_ratio_;
}

std::vector<prometheus::MetricFamily> NodeCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;

  auto cpu = MakeFamily("embody_node_cpu_utilization_ratio",
                        "Share of all CPUs' time spent busy (not idle, not waiting for I/O)",
                        MetricType::Gauge);
  AddSample(cpu, {}, CpuRatio());
  out.push_back(std::move(cpu));

  auto meminfo = common::ReadFile("/proc/meminfo");
  if (auto mem = meminfo.ok() ? ParseMemoryUse(*meminfo) : std::nullopt) {
    auto total = MakeFamily("embody_node_memory_total_bytes", "Physical memory (MemTotal)",
                            MetricType::Gauge);
    AddSample(total, {}, static_cast<double>(mem->total_bytes));
    out.push_back(std::move(total));
    auto used = MakeFamily("embody_node_memory_used_bytes",
                           "Memory in use: MemTotal - MemAvailable", MetricType::Gauge);
    AddSample(used, {}, static_cast<double>(mem->used_bytes));
    out.push_back(std::move(used));
  }
  return out;
}

JobProcessCollector::JobProcessCollector(JobRootsFn jobs)
    : jobs_(std::move(jobs)),
      ticks_per_second_(std::max(1L, ::sysconf(_SC_CLK_TCK))),
      page_bytes_(std::max(1L, ::sysconf(_SC_PAGESIZE))) {}

std::vector<prometheus::MetricFamily> JobProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  std::vector<JobRoot> roots = jobs_ ? jobs_() : std::vector<JobRoot>{};
  if (roots.empty()) return out;
  auto cpu_seconds = MakeFamily("embody_job_process_cpu_seconds_total",
                                "CPU time (user + system) of the job's processes on this node",
                                MetricType::Counter);
  auto resident =
      MakeFamily("embody_job_process_resident_memory_bytes",
                 "Resident memory of the job's processes on this node", MetricType::Gauge);
  std::vector<ProcessEntry> table = ListProcesses();
  for (const JobRoot& job : roots) {
    // The launcher leads the session its ranks run in; JobTree adds descendants that left it.
    ProcessUsage u =
        SumUsage(table, JobTree(table, job.pid, job.pid), ticks_per_second_, page_bytes_);
    MetricLabels labels{{"job", std::to_string(job.job_id)}, {"tenant", job.tenant}};
    AddSample(cpu_seconds, labels, u.cpu_seconds);
    AddSample(resident, labels, static_cast<double>(u.resident_bytes));
  }
  out.push_back(std::move(cpu_seconds));
  out.push_back(std::move(resident));
  return out;
}

}  // namespace agent
