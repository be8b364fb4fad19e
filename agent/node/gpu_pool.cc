#include "agent/node/gpu_pool.h"

#include <algorithm>
#include <set>

namespace agent {

GpuPool::GpuPool(std::vector<NodeGpu> gpus) : gpus_(std::move(gpus)) {}

common::Result<std::vector<int>> GpuPool::Take(const std::string& holder, int n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (n <= 0) return std::vector<int>{};
  if (held_.count(holder)) {
    return common::FailedPrecondition(holder + " already holds GPUs on this node");
  }
  std::set<int> taken;
  for (const auto& [h, indices] : held_) taken.insert(indices.begin(), indices.end());
  std::vector<int> mine;
  for (const NodeGpu& g : gpus_) {
    if (static_cast<int>(mine.size()) == n) break;
    if (!taken.count(g.index)) mine.push_back(g.index);
  }
  if (static_cast<int>(mine.size()) < n) {
    return common::FailedPrecondition("the job needs " + std::to_string(n) + " GPUs and " +
                                      std::to_string(mine.size()) + " are free on this node");
  }
  held_[holder] = mine;
  return mine;
}

void GpuPool::Release(const std::string& holder) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(holder);
}

std::vector<int> GpuPool::InUse() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (const auto& [h, indices] : held_) out.insert(out.end(), indices.begin(), indices.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> GpuPool::MinorsExcept(const std::vector<int>& mine) const {
  std::vector<int> out;
  for (const NodeGpu& g : gpus_) {
    if (std::find(mine.begin(), mine.end(), g.index) == mine.end()) out.push_back(g.minor);
  }
  return out;
}

}  // namespace agent
