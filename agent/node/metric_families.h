// Small helpers for collectors that build Prometheus metric families by hand at scrape time
// (node, GPU and job series), rather than keeping long-lived prometheus-cpp metric objects whose
// removal would have to be tracked.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

namespace agent {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

inline prometheus::MetricFamily MakeFamily(std::string name, std::string help,
                                           prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

// Appends one sample; `f.type` decides whether it is a gauge or a counter value.
inline void AddSample(prometheus::MetricFamily& f, const MetricLabels& labels, double value) {
  prometheus::ClientMetric m;
  for (const auto& [name, v] : labels) m.label.push_back({name, v});
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace agent
