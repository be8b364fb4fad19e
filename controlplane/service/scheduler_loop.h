// The scheduler loop: every period (or sooner when woken by a submit, a registration or a freed
// allocation) the leader replica runs one cycle:
//   1. nodes silent for 3 heartbeat intervals become DOWN; their jobs restart (RESTARTING ->
//      PENDING with attempt+1) while restarts are left, else FAILED "node X lost";
//   2. PENDING jobs are placed by Schedule() onto UP nodes; allocations and PENDING -> SCHEDULED
//      are written in one transaction; jobs that do not fit get their `reason` updated.
// Leadership is decided outside (a PostgreSQL advisory lock); replicas that are not the leader
// only observe.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "controlplane/service/jobs_service.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct CycleStats {
  bool leader = false;
  double seconds = 0;
  int64_t queue_depth = 0;  // PENDING jobs after the cycle
  std::map<std::string, int64_t> jobs_by_state;
  std::map<std::string, int64_t> nodes_by_state;
};

class SchedulerLoop {
 public:
  struct Options {
    int heartbeat_interval_ms = 1000;
    int period_ms = 500;
  };
  SchedulerLoop(Database& db, Options opts, Clock now, std::function<bool()> try_lead,
                std::function<void(const CycleStats&)> observe)
      : db_(db), opts_(opts), now_(std::move(now)), try_lead_(std::move(try_lead)),
        observe_(std::move(observe)) {}
  ~SchedulerLoop() { Stop(); }

  // One cycle as leader (tests call this directly).
  Status RunOnce();

  void Start();
  void Stop();
  void Wake();

 private:
  Status MarkLostNodes();
  Status PlacePending();
  Status Observe(CycleStats& stats);
  void Loop();

  Database& db_;
  const Options opts_;
  Clock now_;
  std::function<bool()> try_lead_;
  std::function<void(const CycleStats&)> observe_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace controlplane::service
