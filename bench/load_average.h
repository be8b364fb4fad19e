// The 1-minute load average, printed beside every bench figure: the machines are shared, and a
// number should say how busy the machine was when it was taken. -1 when it cannot be read.
#pragma once

#include <cstdio>

namespace bench {

inline double LoadAverage() {
  double load = -1.0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1.0;
    std::fclose(f);
  }
  return load;
}

}  // namespace bench
