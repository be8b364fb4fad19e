#include "agent/node/agent_metrics.h"

#include <cmath>

#include <prometheus/text_serializer.h>

#include "agent/node/job_series.h"
#include "agent/node/metric_families.h"

namespace agent {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

constexpr const char* kStepSeries = "embody_job_step";

}  // namespace

AgentMetrics::AgentMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      heartbeats_(BuildCounter()
                      .Name("embody_agent_heartbeats_total")
                      .Help("Heartbeats the server answered")
                      .Register(*registry_)
                      .Add({})),
      heartbeat_failures_(BuildCounter()
                              .Name("embody_agent_heartbeat_failures_total")
                              .Help("Heartbeats and registrations that failed")
                              .Register(*registry_)
                              .Add({})),
      cpu_slots_(BuildGauge()
                     .Name("embody_node_cpu_slots")
                     .Help("CPU slots this node offers")
                     .Register(*registry_)
                     .Add({})),
      gpus_(BuildGauge()
                .Name("embody_node_gpus")
                .Help("GPUs found through NVML (0 without a GPU, a driver or NVML)")
                .Register(*registry_)
                .Add({})),
      jobs_running_(BuildGauge()
                        .Name("embody_agent_jobs_running")
                        .Help("Jobs whose processes are alive on this node")
                        .Register(*registry_)
                        .Add({})),
      events_dropped_(BuildCounter()
                          .Name("embody_agent_events_dropped_total")
                          .Help("Job events not forwarded to the server, by reason: refused at "
                                "the local API (malformed, bad_type, too_large, too_deep, "
                                "bad_text, bad_field, queue_full) or old step events dropped "
                                "for room (evicted)")
                          .Register(*registry_)),
      series_dropped_(BuildCounter()
                          .Name("embody_agent_job_series_dropped_total")
                          .Help("Numeric step-event fields not exported: a refused name, or past "
                                "the per-job limit on series names")
                          .Register(*registry_)
                          .Add({})) {}

void AgentMetrics::HeartbeatSucceeded() { heartbeats_.Increment(); }
void AgentMetrics::HeartbeatFailed() { heartbeat_failures_.Increment(); }
void AgentMetrics::SetNode(int cpu_slots, int gpus) {
  cpu_slots_.Set(cpu_slots);
  gpus_.Set(gpus);
}
void AgentMetrics::SetJobsRunning(int n) { jobs_running_.Set(n); }
void AgentMetrics::SetEventsDropped(uint64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  if (total <= events_dropped_seen_) return;
  events_dropped_.Add({{"reason", "evicted"}})
      .Increment(static_cast<double>(total - events_dropped_seen_));
  events_dropped_seen_ = total;
}

void AgentMetrics::CountEventsDropped(const std::string& reason, uint64_t n) {
  // Add() finds the series when it exists; prometheus-cpp's families are thread-safe.
  events_dropped_.Add({{"reason", reason}}).Increment(static_cast<double>(n));
}

void AgentMetrics::ObserveStep(int64_t job_id, const std::string& tenant,
                               const nlohmann::json& step) {
  if (!step.is_object()) return;
  std::lock_guard<std::mutex> lock(mu_);
  JobSteps& job = jobs_[job_id];
  job.tenant = tenant;
  double dropped = 0;
  for (const auto& [field, value] : step.items()) {
    if (!value.is_number()) continue;  // strings, booleans, objects: not series
    double v = value.get<double>();
    if (!std::isfinite(v)) continue;
    if (field == "step") {
      job.has_step = true;
      job.step = v;
    }
    auto name = NameJobSeries(field);
    if (!name) {
      ++dropped;
      continue;
    }
    auto it = job.values.find(name->name);
    if (it == job.values.end()) {
      // `step` is outside the budget: the stall alert depends on it.
      size_t budgeted = job.values.size() - (job.values.count(kStepSeries) ? 1 : 0);
      if (name->name != kStepSeries && budgeted >= kMaxSeriesPerJob) {
        ++dropped;
        continue;
      }
      it = job.values.emplace(name->name, 0.0).first;
    }
    it->second = v * name->scale;
  }
  if (dropped > 0) series_dropped_.Increment(dropped);
}

void AgentMetrics::RemoveJob(int64_t job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(job_id);
}

void AgentMetrics::AddNodeCollector(const prometheus::Collectable* collector) {
  std::lock_guard<std::mutex> lock(mu_);
  node_collectors_.push_back(collector);
}

void AgentMetrics::AddJobCollector(const prometheus::Collectable* collector) {
  std::lock_guard<std::mutex> lock(mu_);
  job_collectors_.push_back(collector);
}

std::vector<prometheus::MetricFamily> AgentMetrics::JobFamilies(int64_t job_id) const {
  std::vector<prometheus::MetricFamily> out;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return out;
  const JobSteps& job = it->second;
  for (const auto& [name, value] : job.values) {
    out.push_back(MakeFamily(name, JobSeriesHelp(name), prometheus::MetricType::Gauge));
    AddSample(out.back(), {}, value);
  }
  if (job.has_step) {
    out.push_back(MakeFamily("embody_job_steps_total",
                             "Optimizer steps the job has completed (its latest step)",
                             prometheus::MetricType::Counter));
    AddSample(out.back(), {}, job.step);
  }
  return out;
}

std::string AgentMetrics::Serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<const prometheus::Collectable*> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = node_collectors_;
  }
  // Outside the lock: collectors read /proc and NVML, which can take milliseconds.
  for (const auto* c : collectors) {
    for (auto& f : c->Collect()) families.push_back(std::move(f));
  }
  return prometheus::TextSerializer().Serialize(families);
}

std::string AgentMetrics::SerializeJob(int64_t job_id) const {
  std::vector<prometheus::MetricFamily> families;
  std::vector<const prometheus::Collectable*> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    families = JobFamilies(job_id);
    collectors = job_collectors_;
  }
  // A job collector's samples of this job only, without the labels discovery assigns.
  const std::string id = std::to_string(job_id);
  for (const auto* c : collectors) {
    for (auto& f : c->Collect()) {
      std::vector<prometheus::ClientMetric> mine;
      for (auto& m : f.metric) {
        bool ours = false;
        std::vector<prometheus::ClientMetric::Label> kept;
        for (auto& l : m.label) {
          if (l.name == "job") {
            ours = l.value == id;
          } else if (l.name != "tenant") {
            kept.push_back(std::move(l));
          }
        }
        if (!ours) continue;
        m.label = std::move(kept);
        mine.push_back(std::move(m));
      }
      if (mine.empty()) continue;
      f.metric = std::move(mine);
      families.push_back(std::move(f));
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace agent
