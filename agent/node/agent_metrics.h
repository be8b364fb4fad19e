// The agent's Prometheus series: its own health, the node, and per-job step metrics taken from
// the latest `step` event of each job (removed when the job ends). Thread-safe; Serialize()
// renders the node's set for GET /metrics, SerializeJob() one job's for GET /metrics/jobs/{id}.
//
// Two sets, kept apart by construction rather than by filtering text: the public set (the
// agent's health counters, and node and GPU collectors) names no job and no tenant and is served
// to anyone, since every job on the node can reach the agent's port; the per-job set (step
// series and job collectors) is served one job at a time, only to the scraper holding the
// cluster's metrics secret (local_api.h), so one tenant's job cannot read another's.
//
// A job's series carry no label naming the job, its tenant or the node: Prometheus takes those
// from the server's service discovery, which lists one target per job and node placement
// (controlplane/service/scrape_targets.h). A node, whatever it runs, can then only set the
// values of the series of jobs placed on it, never name another node, job or tenant.
//
// Every numeric top-level field of a step event becomes a gauge named by NameJobSeries
// (job_series.h), so a job's further series appear without code changes; `step` also feeds
// embody_job_steps_total. A job gets at most kMaxSeriesPerJob names besides embody_job_step
// (which the stall alert needs, so it always has room): fields past that, or whose
// names are refused, are counted in embody_agent_job_series_dropped_total and not exported, so a
// buggy job cannot blow up the cardinality Prometheus stores.
//
// Collectors added with AddNodeCollector (node, GPUs) and AddJobCollector (job processes) are
// read at each Serialize() that serves them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <nlohmann/json.hpp>

namespace agent {

class AgentMetrics {
 public:
  static constexpr size_t kMaxSeriesPerJob = 64;

  AgentMetrics();

  void HeartbeatSucceeded();
  void HeartbeatFailed();
  void SetNode(int cpu_slots, int gpus);
  void SetJobsRunning(int n);
  // embody_agent_events_dropped_total{reason}: `total` is the event queue's running count of step
  // events dropped for room (reason "evicted"); the counter follows it.
  void SetEventsDropped(uint64_t total);
  // `n` more events dropped for `reason`: a word of api::EventRejection, or "queue_full" (a post
  // refused for want of room in the queue).
  void CountEventsDropped(const std::string& reason, uint64_t n = 1);
  // Updates the job's gauges from the numeric fields of a step event.
  void ObserveStep(int64_t job_id, const std::string& tenant, const nlohmann::json& step);
  void RemoveJob(int64_t job_id);

  // `collector` must outlive every later Serialize() call; its families are appended as they are.
  // A node collector's families go to anyone and must name no job and no tenant. A job
  // collector's samples carry the label `job` (the id) and may carry `tenant`: SerializeJob keeps
  // those of its job and drops both labels.
  void AddNodeCollector(const prometheus::Collectable* collector);
  void AddJobCollector(const prometheus::Collectable* collector);

  // The public set: the agent's health, the node's and its GPUs' series.
  std::string Serialize() const;
  // One job's series, without job, tenant or node labels (empty when the job has none here).
  std::string SerializeJob(int64_t job_id) const;

 private:
  struct JobSteps {
    std::string tenant;
    std::map<std::string, double> values;  // metric name -> latest value
    bool has_step = false;
    double step = 0;
  };

  std::vector<prometheus::MetricFamily> JobFamilies(int64_t job_id) const;  // mu_ held

  std::shared_ptr<prometheus::Registry> registry_;  // public: the agent's own health
  prometheus::Counter& heartbeats_;
  prometheus::Counter& heartbeat_failures_;
  prometheus::Gauge& cpu_slots_;
  prometheus::Gauge& gpus_;
  prometheus::Gauge& jobs_running_;
  prometheus::Family<prometheus::Counter>& events_dropped_;
  prometheus::Counter& series_dropped_;

  mutable std::mutex mu_;  // guards everything below
  uint64_t events_dropped_seen_ = 0;
  std::map<int64_t, JobSteps> jobs_;
  std::vector<const prometheus::Collectable*> node_collectors_;
  std::vector<const prometheus::Collectable*> job_collectors_;
};

}  // namespace agent
