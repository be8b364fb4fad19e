#include "agent/agent_metrics.h"

#include <prometheus/text_serializer.h>

namespace agent {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

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
                .Help("GPUs found through NVML (0 without NVML)")
                .Register(*registry_)
                .Add({})),
      jobs_running_(BuildGauge()
                        .Name("embody_agent_jobs_running")
                        .Help("Jobs whose processes are alive on this node")
                        .Register(*registry_)
                        .Add({})),
      events_dropped_(BuildCounter()
                          .Name("embody_agent_events_dropped_total")
                          .Help("Job events dropped because the queue to the server was full")
                          .Register(*registry_)
                          .Add({})),
      loss_(BuildGauge().Name("embody_job_loss").Help("Latest training loss").Register(*registry_)),
      tokens_per_second_(BuildGauge()
                             .Name("embody_job_tokens_per_second")
                             .Help("Latest training throughput in tokens per second")
                             .Register(*registry_)),
      samples_per_second_(BuildGauge()
                              .Name("embody_job_samples_per_second")
                              .Help("Latest training throughput in samples per second")
                              .Register(*registry_)),
      step_(
          BuildGauge().Name("embody_job_step").Help("Latest optimizer step").Register(*registry_)) {
}

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
  events_dropped_.Increment(static_cast<double>(total - events_dropped_seen_));
  events_dropped_seen_ = total;
}

void AgentMetrics::ObserveStep(int64_t job_id, const std::string& tenant,
                               const nlohmann::json& step) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    prometheus::Labels labels{{"job", std::to_string(job_id)}, {"tenant", tenant}};
    JobSeries s;
    s.loss = &loss_.Add(labels);
    s.tokens_per_second = &tokens_per_second_.Add(labels);
    s.samples_per_second = &samples_per_second_.Add(labels);
    s.step = &step_.Add(labels);
    it = jobs_.emplace(job_id, s).first;
  }
  auto set = [&](const char* field, prometheus::Gauge* g) {
    auto f = step.find(field);
    if (f != step.end() && f->is_number()) g->Set(f->get<double>());
  };
  set("loss", it->second.loss);
  set("tokens_per_s", it->second.tokens_per_second);
  set("samples_per_s", it->second.samples_per_second);
  set("step", it->second.step);
}

void AgentMetrics::RemoveJob(int64_t job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  loss_.Remove(it->second.loss);
  tokens_per_second_.Remove(it->second.tokens_per_second);
  samples_per_second_.Remove(it->second.samples_per_second);
  step_.Remove(it->second.step);
  jobs_.erase(it);
}

std::string AgentMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace agent
