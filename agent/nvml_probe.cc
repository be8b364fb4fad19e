#include "agent/nvml_probe.h"

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
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned*);
using HandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using NameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);

template <typename Fn>
Fn Symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}

}  // namespace

std::vector<api::GpuInfo> ProbeNvmlGpus(const std::string& library) {
  std::vector<api::GpuInfo> gpus;
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return gpus;
  auto init = Symbol<InitFn>(lib, "nvmlInit_v2");
  auto shutdown = Symbol<ShutdownFn>(lib, "nvmlShutdown");
  auto count_fn = Symbol<CountFn>(lib, "nvmlDeviceGetCount_v2");
  auto handle_fn = Symbol<HandleFn>(lib, "nvmlDeviceGetHandleByIndex_v2");
  auto name_fn = Symbol<NameFn>(lib, "nvmlDeviceGetName");
  auto memory_fn = Symbol<MemoryFn>(lib, "nvmlDeviceGetMemoryInfo");
  if (init && shutdown && count_fn && handle_fn && name_fn && memory_fn && init() == kNvmlSuccess) {
    unsigned count = 0;
    if (count_fn(&count) == kNvmlSuccess) {
      for (unsigned i = 0; i < count; ++i) {
        nvmlDevice_t dev = nullptr;
        if (handle_fn(i, &dev) != kNvmlSuccess) continue;
        api::GpuInfo g;
        g.index = static_cast<int>(i);
        char name[kNameBufferSize] = {};
        if (name_fn(dev, name, kNameBufferSize) == kNvmlSuccess) g.name = name;
        nvmlMemory_t mem{};
        if (memory_fn(dev, &mem) == kNvmlSuccess) g.memory_bytes = static_cast<int64_t>(mem.total);
        gpus.push_back(std::move(g));
      }
    }
    shutdown();
  }
  ::dlclose(lib);
  return gpus;
}

}  // namespace agent
