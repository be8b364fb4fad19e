// Job cgroups: where a node enforces a job's memory, CPU and process limits, and how the agent
// finds every process of a job, even one that left its process tree.
//
// At start the agent looks at what the node mounts (/proc/self/mountinfo) and where it itself
// sits (/proc/self/cgroup), and uses cgroup v2 when its own cgroup offers the memory, cpu and
// pids controllers, else the v1 memory controller (with cpu and pids where mounted), else none.
// Job cgroups live under the agent's own cgroup, in a directory named after the agent
// (embody-<tag>, the tag derived from its data directory, so two agents on one machine never
// share one):
//
//   v2: <own>/embody-<tag>/job-<id>        memory.max, memory.swap.max 0, cpu.max, pids.max,
//                                          a BPF device program (other jobs' GPUs)
//   v1: <memory own>/embody-<tag>/job-<id> memory.limit_in_bytes (+ memsw where present)
//       <cpu own>/embody-<tag>/job-<id>    cpu.cfs_quota_us / cpu.cfs_period_us
//       <pids own>/embody-<tag>/job-<id>   pids.max
//       <devices own>/embody-<tag>/job-<id> devices.deny (other jobs' GPUs)
//
// On v2 a cgroup with processes cannot hand controllers to children (unless it is the root):
// the agent then moves itself into <own>/embody-agent first. The job's first process joins the
// cgroup before it execs (agent/sandbox/spawn.h), so everything it starts is inside.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

enum class CgroupVersion { kNone, kV1, kV2 };
const char* CgroupVersionName(CgroupVersion v);  // "none", "v1", "v2"

// One cgroup file-system mount, from a /proc/self/mountinfo line.
struct CgroupMount {
  std::string mount_point;
  std::string root;  // the hierarchy's path mounted there
  bool v2 = false;
  std::set<std::string> controllers;  // v1 only (from the super options)
};
std::vector<CgroupMount> ParseCgroupMounts(const std::string& mountinfo);
// /proc/self/cgroup: controller -> path; the v2 entry ("0::/path") under "".
std::map<std::string, std::string> ParseProcCgroup(const std::string& text);

// The directories of the agent's own cgroup in each hierarchy it could use, from the two
// files above: "" -> the v2 directory (when mounted), "memory"/"cpu"/"pids" -> v1 directories.
std::map<std::string, std::string> OwnCgroupDirs(const std::vector<CgroupMount>& mounts,
                                                 const std::map<std::string, std::string>& self);

struct CgroupSetup {
  CgroupVersion version = CgroupVersion::kNone;
  // The parent of the job cgroups: "" -> directory on v2; controller -> directory on v1.
  std::map<std::string, std::string> parents;
  std::string note;  // why the node has no cgroups, or what was given up
};

// Probes this machine and creates the parents (the "embody-<tag>" directories). Never fails:
// a node without usable cgroups gets version kNone and a note for the log.
CgroupSetup SetUpCgroups(const std::string& tag);
// Removes the parents SetUpCgroups created (they must be empty: no job running).
void TearDownCgroups(const CgroupSetup& setup);

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0: none
  int cpus = 0;              // CPU quota in whole CPUs; 0: none
  int64_t max_pids = 0;      // 0: none
  // NVIDIA GPU minors (/dev/nvidiaN is character device 195:N) the job may not open: the node's
  // GPUs that are not the job's. CUDA_VISIBLE_DEVICES alone is advice a job can unset, so the
  // cgroup enforces it: on v1 by the devices controller's devices.deny where that controller is
  // mounted (without it, nothing is enforced), on v2 by a BPF device program attached to the
  // job's cgroup (agent/sandbox/cgroup_device_filter.h). Create fails when the rules or the program
  // cannot be put in place.
  std::vector<int> denied_gpus;
};

// The devices-controller rules that deny `minors` of /dev/nvidia* ("c 195:N rwm" each).
std::vector<std::string> GpuDenyRules(const std::vector<int>& minors);

// One job's cgroup (one directory per hierarchy on v1).
class JobCgroup {
 public:
  // Creates <parent>/job-<id> in each parent (a leftover of the same name, from an agent that
  // died, is emptied and replaced) and writes the limits.
  static common::Result<std::unique_ptr<JobCgroup>> Create(const CgroupSetup& setup,
                                                           int64_t job_id,
                                                           const CgroupLimits& limits);
  // A job cgroup made earlier, maybe by an agent process that has since gone (`dirs` as dirs()
  // gave them): to kill what is inside and remove it.
  static std::unique_ptr<JobCgroup> Existing(CgroupVersion v, std::vector<std::string> dirs);
  // Files a process writes "0" into to join (spawn's cgroup_procs).
  std::vector<std::string> ProcsFiles() const;
  std::vector<pid_t> Pids() const;
  // SIGKILL to every process inside (cgroup.kill on v2 where the kernel has it).
  void KillAll() const;
  // Whether the memory limit killed or refused something.
  bool MemoryLimitHit() const;
  // Kills what is left, waits (up to `wait_ms`) for the cgroup to empty and removes it.
  common::Status Remove(int wait_ms = 5000);
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  JobCgroup(CgroupVersion v, std::vector<std::string> dirs, std::string memory_dir)
      : version_(v), dirs_(std::move(dirs)), memory_dir_(std::move(memory_dir)) {}
  CgroupVersion version_;
  std::vector<std::string> dirs_;
  std::string memory_dir_;
};

}  // namespace agent
