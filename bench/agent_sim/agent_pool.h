// Many simulated agents on a few threads: each agent (SimAgent + its credential + its channel to
// the server) is a state machine with its own next-heartbeat time, and a small pool of worker
// threads runs whichever agent is due next, one blocking HTTP call at a time. A thousand agents
// cost a thousand heartbeats per interval, not a thousand threads on this side, so the client
// does not become what the benchmark measures.
//
// Each agent follows agent/heartbeat/heartbeat_loop.h: register with the join token and adopt the node
// credential the server issues; heartbeat every interval the server named, or at once when one
// of its jobs ends, after a reply with a launch or a kill, and after reporting an end; back off exponentially (500 ms doubling, 30 s cap, jittered) after a failed
// call; register again on not_found (the server lost the node) or unauthenticated (it refused the
// credential). Each agent has its own connection, kept alive between calls as the real agent's
// HttpServerChannel keeps it, or (keep_alive false) a new connection per call.
//
// Recorded in SimStats: "register" and "heartbeat" latencies (heartbeats also per phase, see
// SetPhase), "lateness" (how long past its due time a call started: a large value means the pool
// itself is behind), "silence" (time between an agent's successive answered heartbeats; past 3
// intervals the server holds the node DOWN and fails or restarts its jobs), and errors as
// "register: CODE" / "heartbeat: CODE".
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/heartbeat/node_credential.h"
#include "agent/heartbeat/server_client.h"
#include "bench/agent_sim/sim_agent.h"
#include "bench/agent_sim/sim_stats.h"

namespace bench {

struct AgentPoolOptions {
  std::string server_url;
  std::string join_token;
  std::string credential_dir;  // node credentials, one file per agent
  int agents = 1000;
  int threads = 64;
  int cpu_slots = 8;  // per simulated node
  int64_t memory_bytes = int64_t{64} << 30;
  double job_seconds = 2;
  bool keep_alive = true;
  std::string name_prefix = "sim";
};

class AgentPool {
 public:
  AgentPool(AgentPoolOptions options, SimStats* stats, JobObserver* observer);
  ~AgentPool();  // Stop()s

  void Start();
  void Stop();
  // Heartbeat latencies from now on are also recorded as "heartbeat/<phase>".
  void SetPhase(const std::string& phase);
  int registered() const { return registered_.load(); }
  int64_t heartbeats() const { return heartbeats_.load(); }
  int64_t repeated_launches() const;
  // Gaps between an agent's answered heartbeats longer than 3 intervals (the server's DOWN rule)
  // that remain so once the heartbeat's late start is taken off: the server's doing.
  int64_t down_gaps() const { return down_gaps_.load(); }
  // Gaps over 3 intervals only because this process started the heartbeat late.
  int64_t late_gaps() const { return late_gaps_.load(); }

 private:
  struct Agent;
  struct Due {
    double at;
    int index;
    bool operator>(const Due& o) const { return at > o.at; }
  };

  void Work();
  // One call for agent `a` (register or heartbeat); returns when it is due next.
  double Step(Agent& a, double due);
  double Backoff(Agent& a);

  const AgentPoolOptions options_;
  SimStats* const stats_;
  JobObserver* const observer_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::vector<std::thread> threads_;
  std::atomic<int> registered_{0};
  std::atomic<int64_t> heartbeats_{0};
  std::atomic<int64_t> down_gaps_{0};
  std::atomic<int64_t> late_gaps_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> queue_;
  bool stop_ = false;
  std::string phase_;
};

}  // namespace bench
