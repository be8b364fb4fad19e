// GPUs through NVML, loaded at run time with dlopen so the agent needs no NVIDIA library to build
// or to run. No library, a missing symbol or an NVML error at initialisation means "no GPUs",
// never a failure; a reading a device does not support (power on some boards) is left out.
//
// Only the handful of NVML entry points below are used; their C ABI has been stable since the
// _v2 names of CUDA 5. Tests point `library` at a stand-in built from agent/testing/fake_nvml.c.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/agent_protocol.h"

namespace agent {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// One device's state at one moment, in NVML's units except power (converted to watts).
struct GpuSample {
  int index = 0;
  int minor_number = 0;  // N of /dev/nvidiaN; the index when NVML cannot say
  std::string name;      // "NVIDIA H100 80GB HBM3"
  std::string uuid;      // "GPU-..."
  std::optional<uint64_t> memory_total_bytes, memory_used_bytes, memory_free_bytes;
  std::optional<unsigned> gpu_util_percent;     // time a kernel ran, last sample period
  std::optional<unsigned> memory_util_percent;  // time device memory was read or written
  std::optional<double> power_watts;
  std::optional<unsigned> temperature_celsius;
};

// An initialised NVML. Thread-safe. nvmlShutdown and dlclose happen in the destructor.
class Nvml {
 public:
  // nullptr when the library cannot be loaded, lacks a required symbol or fails nvmlInit.
  static std::unique_ptr<Nvml> Open(const std::string& library = kNvmlLibrary);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Every device NVML lists now; a device whose handle cannot be had is skipped.
  std::vector<GpuSample> Sample() const;

 private:
  struct Api;
  Nvml(void* handle, std::unique_ptr<Api> api);

  void* const handle_;
  const std::unique_ptr<Api> api_;
  mutable std::mutex mu_;
};

// The GPUs as the agent registers them (index, name, total memory); empty without NVML.
std::vector<api::GpuInfo> ProbeNvmlGpus(const std::string& library = kNvmlLibrary);

}  // namespace agent
