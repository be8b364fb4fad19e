// Held heartbeats (api::HeartbeatRequest::wait_ms): an idle agent's heartbeat waits here until
// something may have a command for its node (the scheduler placed a job there, a job there is
// being cancelled) or its time is up, so a launch goes out as soon as it is committed rather
// than at the node's next beat.
//
// Holding a heartbeat holds one of the HTTP server's worker threads, so at most `max_held` wait
// at once; past that a heartbeat is answered at once, as if it had not asked to wait. A wake is
// never lost: a waiter compares a per-node generation it read before its transaction began,
// so a notification that landed between its read of the commands and its wait still wakes it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace controlplane::service {

class NodeWaiters {
 public:
  explicit NodeWaiters(int max_held) : max_held_(max_held) {}

  // The node's generation now; pass it to Wait.
  uint64_t Generation(int64_t node_id);
  // Waits until the node's generation moves past `seen`, or `timeout` passes, or Shutdown.
  // Returns whether it was woken (false: timed out, shut down, or refused because `max_held`
  // heartbeats wait already, in which case it returns at once).
  bool Wait(int64_t node_id, uint64_t seen, std::chrono::milliseconds timeout);
  void Notify(int64_t node_id);
  void Notify(const std::vector<int64_t>& node_ids);
  // Every node: after a scheduling cycle that placed jobs without saying where.
  void NotifyAll();

  // A heartbeat that reported ended jobs waits for the scheduling pass its freed slots woke
  // (SchedulerLoop::WakeForCapacity's number), so that a job placed onto them goes out in its
  // own reply. The loop says when each cycle is over, after notifying the nodes it gave
  // commands.
  void PassDone(uint64_t seq);
  enum class PassWait { kNotified, kPassDone, kTimedOut };
  // Until the node's generation moves past `seen` (kNotified), cycle `pass` or a later one is
  // over without that (kPassDone), or `timeout` passes, Shutdown, or `max_held` wait already
  // (kTimedOut).
  PassWait WaitForPass(int64_t node_id, uint64_t seen, uint64_t pass,
                       std::chrono::milliseconds timeout);
  // Wakes every waiter and refuses new ones (the server is stopping).
  void Shutdown();
  int held() const;

 private:
  const int max_held_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<int64_t, uint64_t> generation_;
  uint64_t all_generation_ = 0;  // bumped by NotifyAll; part of every node's generation
  uint64_t passes_done_ = 0;     // the highest cycle number PassDone was told
  int held_ = 0;
  bool shutdown_ = false;
};

}  // namespace controlplane::service
