#include "agent/node/nvml_probe.h"

#include <dlfcn.h>

namespace agent {
namespace {

// The few NVML declarations used, from nvml.h (stable C ABI).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned gpu;
  unsigned memory;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlTemperatureGpu = 0;    // NVML_TEMPERATURE_GPU
constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  // Optional: a missing one only leaves its reading out.
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*minor_number)(nvmlDevice_t, unsigned*) = nullptr;

  bool Load(void* lib) {
    init = Symbol<decltype(init)>(lib, "nvmlInit_v2");
    shutdown = Symbol<decltype(shutdown)>(lib, "nvmlShutdown");
    count = Symbol<decltype(count)>(lib, "nvmlDeviceGetCount_v2");
    handle = Symbol<decltype(handle)>(lib, "nvmlDeviceGetHandleByIndex_v2");
    name = Symbol<decltype(name)>(lib, "nvmlDeviceGetName");
    uuid = Symbol<decltype(uuid)>(lib, "nvmlDeviceGetUUID");
    memory = Symbol<decltype(memory)>(lib, "nvmlDeviceGetMemoryInfo");
    utilization = Symbol<decltype(utilization)>(lib, "nvmlDeviceGetUtilizationRates");
    power = Symbol<decltype(power)>(lib, "nvmlDeviceGetPowerUsage");
    temperature = Symbol<decltype(temperature)>(lib, "nvmlDeviceGetTemperature");
    minor_number = Symbol<decltype(minor_number)>(lib, "nvmlDeviceGetMinorNumber");
    return init && shutdown && count && handle && name && uuid && memory;
  }
};

std::unique_ptr<Nvml> Nvml::Open(const std::string& library) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  auto api = std::make_unique<Api>();
  if (!api->Load(lib) || api->init() != kNvmlSuccess) {
    ::dlclose(lib);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(lib, std::move(api)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  ::dlclose(handle_);
}

std::vector<GpuSample> Nvml::Sample() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GpuSample> out;
  unsigned count = 0;
  if (api_->count(&count) != kNvmlSuccess) return out;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (api_->handle(i, &dev) != kNvmlSuccess) continue;
    GpuSample g;
    g.index = static_cast<int>(i);
    g.minor_number = g.index;
    unsigned minor = 0;
    if (api_->minor_number && api_->minor_number(dev, &minor) == kNvmlSuccess) {
      g.minor_number = static_cast<int>(minor);
    }
    char text[kNameBufferSize > kUuidBufferSize ? kNameBufferSize : kUuidBufferSize] = {};
    if (api_->name(dev, text, kNameBufferSize) == kNvmlSuccess) g.name = text;
    text[0] = '\0';
    if (api_->uuid(dev, text, kUuidBufferSize) == kNvmlSuccess) g.uuid = text;
    nvmlMemory_t mem{};
    if (api_->memory(dev, &mem) == kNvmlSuccess) {
      g.memory_total_bytes = mem.total;
      g.memory_used_bytes = mem.used;
      g.memory_free_bytes = mem.free;
    }
    nvmlUtilization_t util{};
    if (api_->utilization && api_->utilization(dev, &util) == kNvmlSuccess) {
      g.gpu_util_percent = util.gpu;
      g.memory_util_percent = util.memory;
    }
    unsigned milliwatts = 0;
    if (api_->power && api_->power(dev, &milliwatts) == kNvmlSuccess) {
      g.power_watts = milliwatts / 1000.0;
    }
    unsigned celsius = 0;
    if (api_->temperature &&
        api_->temperature(dev, kNvmlTemperatureGpu, &celsius) == kNvmlSuccess) {
      g.temperature_celsius = celsius;
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<api::GpuInfo> ProbeNvmlGpus(const std::string& library) {
  std::vector<api::GpuInfo> gpus;
  auto nvml = Nvml::Open(library);
  if (!nvml) return gpus;
  for (const GpuSample& s : nvml->Sample()) {
    api::GpuInfo g;
    g.index = s.index;
    g.name = s.name;
    g.memory_bytes = static_cast<int64_t>(s.memory_total_bytes.value_or(0));
    gpus.push_back(std::move(g));
  }
  return gpus;
}

}  // namespace agent
