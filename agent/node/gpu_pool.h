// The node's GPUs and which are taken: one pool for every part of a job this node runs, the jobs
// it heads (JobRunner) and the daemons it runs for jobs headed elsewhere (RshBridge), so two jobs
// are never given the same GPU however they reached the node. Thread-safe.
//
// A GPU has two numbers: its NVML index, which CUDA_VISIBLE_DEVICES names (with
// CUDA_DEVICE_ORDER=PCI_BUS_ID), and the minor of its device node /dev/nvidiaN, which the cgroup's
// device rules name. They are often equal and need not be.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

struct NodeGpu {
  int index = 0;  // NVML index
  int minor = 0;  // N of /dev/nvidiaN
};

// Holders: a job this node heads, and the daemon this node runs for a job headed elsewhere.
inline std::string HeadGpuHolder(int64_t job_id) { return "job " + std::to_string(job_id); }
inline std::string DaemonGpuHolder(int64_t job_id) {
  return "job " + std::to_string(job_id) + "'s daemon";
}

class GpuPool {
 public:
  GpuPool() = default;
  explicit GpuPool(std::vector<NodeGpu> gpus);

  bool empty() const { return gpus_.empty(); }
  size_t size() const { return gpus_.size(); }

  // `n` free GPUs for `holder` (their indices, in the node's order), or FailedPrecondition saying
  // how many are free, taking nothing. A holder takes once: a second Take before its Release is
  // refused. n == 0 takes nothing and always succeeds.
  common::Result<std::vector<int>> Take(const std::string& holder, int n);
  // Gives back what `holder` took; nothing when it holds none.
  void Release(const std::string& holder);

  // The indices taken now, ascending.
  std::vector<int> InUse() const;
  // The device minors of the node's GPUs whose index is not in `mine`: what a job holding `mine`
  // must be denied.
  std::vector<int> MinorsExcept(const std::vector<int>& mine) const;

 private:
  std::vector<NodeGpu> gpus_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<int>> held_;  // holder -> indices
};

}  // namespace agent
