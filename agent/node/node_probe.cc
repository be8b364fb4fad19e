#include "agent/node/node_probe.h"

#include <sched.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "agent/node/nvml_probe.h"
#include "common/file_util.h"

namespace agent {

int DetectCpuSlots() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

int64_t ParseMemTotal(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    int64_t value = 0;
    std::string unit;
    fields >> value >> unit;
    return unit == "kB" ? value * 1024 : value;
  }
  return 0;
}

NodeResources ProbeNode(int slots_override, const std::string& nvml_library) {
  NodeResources r;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) r.hostname = host;
  r.cpu_slots = slots_override > 0 ? slots_override : DetectCpuSlots();
  auto meminfo = common::ReadFile("/proc/meminfo");
  if (meminfo.ok()) r.memory_bytes = ParseMemTotal(*meminfo);
  r.gpus = ProbeNvmlGpus(nvml_library);
  return r;
}

}  // namespace agent
