// GPU series under the names, units and labels of NVIDIA's dcgm-exporter, so dashboards and
// alerts written for it work on Embody nodes unchanged. Read from NVML at each scrape:
//
//   DCGM_FI_DEV_GPU_UTIL       %     DCGM_FI_DEV_FB_USED  MiB    DCGM_FI_DEV_POWER_USAGE  W
//   DCGM_FI_DEV_MEM_COPY_UTIL  %     DCGM_FI_DEV_FB_FREE  MiB    DCGM_FI_DEV_GPU_TEMP     C
//
// Labels as dcgm-exporter sets them: gpu (NVML index), UUID, device ("nvidia<minor>"),
// modelName, Hostname. A reading the device does not support is left out (as dcgm-exporter does
// with blank values); without NVML nothing is exported and embody_node_gpus says 0.
#pragma once

#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "agent/node/nvml_probe.h"

namespace agent {

// The families for one set of samples; separate from NVML so the mapping is testable alone.
std::vector<prometheus::MetricFamily> DcgmFamilies(const std::vector<GpuSample>& gpus,
                                                   const std::string& hostname);

class GpuCollector : public prometheus::Collectable {
 public:
  // `nvml` may be null (no GPUs); it must outlive the collector.
  GpuCollector(const Nvml* nvml, std::string hostname);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Nvml* const nvml_;
  const std::string hostname_;
};

}  // namespace agent
