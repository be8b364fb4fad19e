// What the processes under test use, read from /proc: a process's CPU seconds (user + system),
// peak resident set (VmHWM) and thread count, and a PostgreSQL cluster's CPU and backend count
// (the postmaster and its children). A background thread samples the maxima that a before/after
// difference cannot give (threads, backends); CPU seconds are read on demand. Linux only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

namespace bench {

struct ProcUsage {
  double cpu_s = 0;            // user + system, children not included
  int64_t peak_rss_bytes = 0;  // VmHWM
  int64_t rss_bytes = 0;       // VmRSS
  int threads = 0;
};

// Zeros when `pid` is gone or unreadable.
ProcUsage ReadProcUsage(pid_t pid);

struct PgUsage {
  double cpu_s = 0;  // the postmaster and every child of it
  int backends = 0;  // children of the postmaster (client backends and its own workers)
};

PgUsage ReadPgUsage(pid_t postmaster);

// Samples peaks every `period_s` until destroyed. A pid <= 0 is not sampled.
class PeakSampler {
 public:
  PeakSampler(pid_t server, pid_t postmaster, double period_s);
  ~PeakSampler();
  int max_server_threads() const { return max_threads_.load(); }
  int max_pg_backends() const { return max_backends_.load(); }

 private:
  void Run();
  const pid_t server_;
  const pid_t postmaster_;
  const double period_s_;
  std::atomic<bool> stop_{false};
  std::atomic<int> max_threads_{0};
  std::atomic<int> max_backends_{0};
  std::thread thread_;
};

}  // namespace bench
