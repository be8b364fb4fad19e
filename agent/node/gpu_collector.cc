#include "agent/node/gpu_collector.h"

#include <cmath>
#include <functional>
#include <optional>

#include "agent/node/metric_families.h"

namespace agent {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct DcgmField {
  const char* name;
  const char* help;  // dcgm-exporter's own help text
  std::function<std::optional<double>(const GpuSample&)> read;
};

std::optional<double> ToMiB(const std::optional<uint64_t>& bytes) {
  // DCGM reports whole MiB.
  if (!bytes) return std::nullopt;
  return std::floor(static_cast<double>(*bytes) / kMiB);
}

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

}  // namespace

std::vector<prometheus::MetricFamily> DcgmFamilies(const std::vector<GpuSample>& gpus,
                                                   const std::string& hostname) {
  static const DcgmField kFields[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
       [](const GpuSample& g) { return AsDouble(g.gpu_util_percent); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).",
       [](const GpuSample& g) { return AsDouble(g.memory_util_percent); }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
       [](const GpuSample& g) { return ToMiB(g.memory_free_bytes); }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
       [](const GpuSample& g) { return ToMiB(g.memory_used_bytes); }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).",
       [](const GpuSample& g) { return g.power_watts; }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
       [](const GpuSample& g) { return AsDouble(g.temperature_celsius); }},
  };
  std::vector<prometheus::MetricFamily> out;
  if (gpus.empty()) return out;
  for (const DcgmField& field : kFields) {
    auto family = MakeFamily(field.name, field.help, prometheus::MetricType::Gauge);
    for (const GpuSample& g : gpus) {
      std::optional<double> value = field.read(g);
      if (!value) continue;
      AddSample(family,
                {{"gpu", std::to_string(g.index)},
                 {"UUID", g.uuid},
                 {"device", "nvidia" + std::to_string(g.minor_number)},
                 {"modelName", g.name},
                 {"Hostname", hostname}},
                *value);
    }
    if (!family.metric.empty()) out.push_back(std::move(family));
  }
  return out;
}

GpuCollector::GpuCollector(const Nvml* nvml, std::string hostname)
    : nvml_(nvml), hostname_(std::move(hostname)) {}

std::vector<prometheus::MetricFamily> GpuCollector::Collect() const {
  if (nvml_ == nullptr) return {};
  return DcgmFamilies(nvml_->Sample(), hostname_);
}

}  // namespace agent
