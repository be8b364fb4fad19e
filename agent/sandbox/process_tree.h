// A view of the process table from /proc, and killing a job's whole tree with it.
//
// mpirun is started in a new session, but Open MPI puts every rank in a process group of its own
// and a rank's children survive mpirun, so signalling one process group is not enough. A job's
// tree is every process in mpirun's session plus every descendant of mpirun found through the
// ppid chain (which also catches a child that called setsid while its parent was alive). A pid is
// identified together with its start time so a recycled pid is never signalled.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace agent {

struct ProcessId {
  pid_t pid = 0;
  uint64_t start_time = 0;  // clock ticks since boot, field 22 of /proc/PID/stat
  bool operator==(const ProcessId&) const = default;
};

struct ProcessEntry {
  ProcessId id;
  pid_t ppid = 0;
  pid_t pgid = 0;
  pid_t sid = 0;
  char state = '?';  // 'Z' for zombies
  // Resource use, fields 14-17 and 24 of /proc/PID/stat: CPU time in clock ticks (the process's
  // own, and that of its children it has waited for) and resident set size in pages.
  uint64_t utime = 0, stime = 0, cutime = 0, cstime = 0;
  uint64_t rss_pages = 0;
};

// Every process visible in /proc (processes that vanish while scanning are skipped).
std::vector<ProcessEntry> ListProcesses();

// Live (non-zombie) processes in session `sid` or descending from `root` (root excluded unless
// it is in the session itself). `root` may be 0 for "session only".
std::vector<ProcessId> JobTree(const std::vector<ProcessEntry>& table, pid_t sid, pid_t root);

// `pid` with its start time; pid 0 when there is no such process.
ProcessId ProcessIdOf(pid_t pid);

// True while `id` names the same, not yet reaped and not zombie, process.
bool IsAlive(const ProcessId& id);

// Sends `sig` to each process of `ids` that is still the same process. Returns how many were
// signalled.
int SignalAll(const std::vector<ProcessId>& ids, int sig);

}  // namespace agent
