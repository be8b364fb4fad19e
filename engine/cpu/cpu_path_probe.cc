// cpu_path_probe PATH: exits 0 when this machine runs EMBODY_CPU_PATH=PATH (scalar, avx2, avx512,
// avx512_bf16), 77 otherwise, saying why. ctest runs the numerics and golden tests once per path
// through engine/testing/on_cpu_path.sh, which asks this first: a path the CPU lacks is a skip,
// never a quiet run of another path.
#include <cstdio>

#include "engine/cpu/cpu_path.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cpu_path_probe scalar|avx2|avx512|avx512_bf16\n");
    return 2;
  }
  if (!engine::cpu::CpuPathRunsHere(argv[1])) {
    std::printf("skipped: this CPU cannot run EMBODY_CPU_PATH=%s\n", argv[1]);
    return 77;
  }
  return 0;
}
