#include "engine/cpu/cpu_path.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace engine::cpu {

const char* CpuPathName(CpuPath path) {
  switch (path) {
    case CpuPath::kScalar:
      return "scalar";
    case CpuPath::kAvx2:
      return "avx2";
    case CpuPath::kAvx512:
      return "avx512";
  }
  return "?";
}

std::optional<CpuPath> ParseCpuPath(std::string_view name) {
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512}) {
    if (name == CpuPathName(p)) return p;
  }
  if (name == "avx512_bf16") return CpuPath::kAvx512;
  return std::nullopt;
}

namespace {

struct CpuFlags {
  bool avx2 = false;
  bool avx512 = false;
  bool avx512_bf16 = false;
};

CpuFlags Detect() {
  CpuFlags f;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's checks include the operating system's XCR0 support for the ymm/zmm state.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("popcnt");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

const CpuFlags& Flags() {
  static const CpuFlags flags = Detect();
  return flags;
}

}  // namespace

bool CpuSupportsAvx512Bf16() { return Flags().avx512_bf16; }

bool CpuPathRunsHere(std::string_view name) {
  const std::optional<CpuPath> p = ParseCpuPath(name);
  if (!p || !CpuSupports(*p)) return false;
  return name != "avx512_bf16" || CpuSupportsAvx512Bf16();
}

bool Avx512Bf16Enabled() {
  static const bool enabled = [] {
    const char* forced = std::getenv("EMBODY_CPU_PATH");
    return CpuSupportsAvx512Bf16() && !(forced != nullptr && std::string_view(forced) == "avx512");
  }();
  return enabled;
}

bool CpuSupports(CpuPath path) {
  const CpuFlags& flags = Flags();
  switch (path) {
    case CpuPath::kScalar:
      return true;
    case CpuPath::kAvx2:
      return flags.avx2;
    case CpuPath::kAvx512:
      return flags.avx512;
  }
  return false;
}

std::vector<CpuPath> SupportedCpuPaths() {
  std::vector<CpuPath> out;
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512}) {
    if (CpuSupports(p)) out.push_back(p);
  }
  return out;
}

CpuPath ChooseCpuPath(const char* forced, std::string* warning) {
  const CpuPath best = SupportedCpuPaths().back();
  if (forced == nullptr || *forced == '\0') return best;
  const std::optional<CpuPath> p = ParseCpuPath(forced);
  if (!p) {
    if (warning) {
      *warning = std::string("EMBODY_CPU_PATH=") + forced +
                 " is not one of scalar, avx2, avx512, avx512_bf16; using " + CpuPathName(best);
    }
    return best;
  }
  if (!CpuPathRunsHere(forced)) {
    if (warning) {
      *warning = std::string("EMBODY_CPU_PATH=") + forced + ": this CPU lacks it; using " +
                 CpuPathName(best);
    }
    return best;
  }
  return *p;
}

CpuPath ActiveCpuPath() {
  static const CpuPath chosen = [] {
    std::string warning;
    const CpuPath p = ChooseCpuPath(std::getenv("EMBODY_CPU_PATH"), &warning);
    if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
    return p;
  }();
  return chosen;
}

}  // namespace engine::cpu
