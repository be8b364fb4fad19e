// The server's Prometheus series, kept in one prometheus-cpp registry and served at /metrics in
// the text format:
//   embody_http_requests_total{route,method,status}   route is the pattern ("/v1/jobs/{id}")
//   embody_http_request_duration_seconds{route}        histogram
//   embody_jobs{state}, embody_nodes{state}            gauges, refreshed every scheduler cycle
//   embody_scheduler_queue_depth, embody_scheduler_cycle_seconds (histogram)
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "controlplane/service/scheduler_loop.h"

namespace controlplane::http {

class ServerMetrics {
 public:
  ServerMetrics();
  void ObserveRequest(const std::string& route, const std::string& method, int status,
                      double seconds);
  void ObserveCycle(const service::CycleStats& stats);
  std::string Serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Gauge& queue_depth_;
  prometheus::Histogram& cycle_seconds_;
};

}  // namespace controlplane::http
