// When this server last heard each node: the time a heartbeat arrived, before its transaction,
// and the time it was answered.
//
// A node's committed `last_heartbeat` trails its heartbeats by their time in the server: waiting
// for a pooled connection, for row locks, for the commit. Under load that is hundreds of
// milliseconds, and a heartbeat still in flight is invisible to the scheduler's DOWN rule, which
// read the committed time alone and declared nodes lost that were talking to it (their jobs
// failed or restarted). The rule takes the later of the two. Replicas that do not lead record
// heartbeats only in the database, so the committed time remains the rule across replicas.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace controlplane::service {

class NodeHeard {
 public:
  void Heard(int64_t node_id, int64_t now_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t& at = heard_[node_id];
    if (now_ms > at) at = now_ms;
  }
  // 0 when this server has not heard the node.
  int64_t Last(int64_t node_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = heard_.find(node_id);
    return it == heard_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<int64_t, int64_t> heard_;
};

}  // namespace controlplane::service
