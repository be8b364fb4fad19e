#include "controlplane/http/metrics.h"

#include <prometheus/text_serializer.h>


namespace controlplane::http {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

namespace {
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

ServerMetrics::ServerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(BuildCounter()
                    .Name("embody_http_requests_total")
                    .Help("HTTP requests served, by route pattern, method and status")
                    .Register(*registry_)),
      durations_(BuildHistogram()
                     .Name("embody_http_request_duration_seconds")
                     .Help("Time to answer an HTTP request, by route pattern")
                     .Register(*registry_)),
      jobs_(BuildGauge().Name("embody_jobs").Help("Jobs by state").Register(*registry_)),
      nodes_(BuildGauge().Name("embody_nodes").Help("Nodes by state").Register(*registry_)),
      queue_depth_(BuildGauge()
                       .Name("embody_scheduler_queue_depth")
                       .Help("Jobs waiting in PENDING")
                       .Register(*registry_)
                       .Add({})),
      cycle_seconds_(BuildHistogram()
                         .Name("embody_scheduler_cycle_seconds")
                         .Help("Duration of one scheduler cycle")
                         .Register(*registry_)
                         .Add({}, kLatencyBuckets)) {
  for (const char* s : {"PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING",
                        "CANCELLED", "RESTARTING"}) {
    jobs_.Add({{"state", s}}).Set(0);
  }
  nodes_.Add({{"state", "UP"}}).Set(0);
  nodes_.Add({{"state", "DOWN"}}).Set(0);
}

void ServerMetrics::ObserveRequest(const std::string& route, const std::string& method,
                                   int status, double seconds) {
  requests_.Add({{"route", route}, {"method", method}, {"status", std::to_string(status)}})
      .Increment();
  durations_.Add({{"route", route}}, kLatencyBuckets).Observe(seconds);
}

void ServerMetrics::ObserveCycle(const service::CycleStats& stats) {
  for (const char* s : {"PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING",
                        "CANCELLED", "RESTARTING"}) {
    auto it = stats.jobs_by_state.find(s);
    jobs_.Add({{"state", s}}).Set(it == stats.jobs_by_state.end() ? 0 : double(it->second));
  }
  for (const auto& [state, n] : stats.nodes_by_state) {
    nodes_.Add({{"state", state}}).Set(static_cast<double>(n));
  }
  queue_depth_.Set(static_cast<double>(stats.queue_depth));
  if (stats.leader) cycle_seconds_.Observe(stats.seconds);
}

std::string ServerMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace controlplane::http
