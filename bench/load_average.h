// What a bench prints beside its figures about the machine that took them: the 1-minute load
// average (the machines are shared, and a number should say how busy the machine was) and the
// CPU model (docs/benchmarks.md records it with every figure).
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

namespace bench {

// -1 when it cannot be read.
inline double LoadAverage() {
  double load = -1.0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1.0;
    std::fclose(f);
  }
  return load;
}

// /proc/cpuinfo's first "model name"; "unknown" when there is none.
inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

}  // namespace bench
