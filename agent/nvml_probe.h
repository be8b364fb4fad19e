// GPUs through NVML, loaded at run time with dlopen so the agent needs no NVIDIA library to build
// or to run. No library, a missing symbol or any NVML error means "no GPUs", never a failure.
#pragma once

#include <string>
#include <vector>

#include "api/agent_protocol.h"

namespace agent {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

std::vector<api::GpuInfo> ProbeNvmlGpus(const std::string& library = kNvmlLibrary);

}  // namespace agent
