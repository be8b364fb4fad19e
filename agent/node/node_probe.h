// What this node offers: name, CPU slots, memory and GPUs, as sent when the agent registers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/agent_protocol.h"

namespace agent {

struct NodeResources {
  std::string hostname;
  int cpu_slots = 0;
  int64_t memory_bytes = 0;
  std::vector<api::GpuInfo> gpus;
};

// `slots_override` > 0 replaces the detected CPU count; `nvml_library` is for tests.
NodeResources ProbeNode(int slots_override, const std::string& nvml_library);

// CPUs this process may run on (sched_getaffinity), else hardware_concurrency, at least 1.
int DetectCpuSlots();
// MemTotal of a /proc/meminfo text, in bytes; 0 when absent.
int64_t ParseMemTotal(const std::string& meminfo);

}  // namespace agent
