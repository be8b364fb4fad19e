// The agent's Prometheus series: its own health, the node, and per-job step metrics taken from
// the latest `step` event of each job (labels `job` and `tenant`; removed when the job ends).
// Thread-safe; Serialize() renders the text exposition format for GET /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <nlohmann/json.hpp>

namespace agent {

class AgentMetrics {
 public:
  AgentMetrics();

  void HeartbeatSucceeded();
  void HeartbeatFailed();
  void SetNode(int cpu_slots, int gpus);
  void SetJobsRunning(int n);
  // `total` is the queue's running count; the counter follows it.
  void SetEventsDropped(uint64_t total);
  // Updates the job's gauges from the numeric fields of a step event.
  void ObserveStep(int64_t job_id, const std::string& tenant, const nlohmann::json& step);
  void RemoveJob(int64_t job_id);

  std::string Serialize() const;

 private:
  struct JobSeries {
    prometheus::Gauge* loss = nullptr;
    prometheus::Gauge* tokens_per_second = nullptr;
    prometheus::Gauge* samples_per_second = nullptr;
    prometheus::Gauge* step = nullptr;
  };

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter& heartbeats_;
  prometheus::Counter& heartbeat_failures_;
  prometheus::Gauge& cpu_slots_;
  prometheus::Gauge& gpus_;
  prometheus::Gauge& jobs_running_;
  prometheus::Counter& events_dropped_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& tokens_per_second_;
  prometheus::Family<prometheus::Gauge>& samples_per_second_;
  prometheus::Family<prometheus::Gauge>& step_;

  std::mutex mu_;  // guards jobs_ and events_dropped_seen_
  uint64_t events_dropped_seen_ = 0;
  std::map<int64_t, JobSeries> jobs_;
};

}  // namespace agent
