// Which instruction-set path the CPU kernels run on, chosen once per process at run time from
// the CPU's flags, never at build time: one binary runs on every x86-64 machine and uses what
// each one has. Only the kernel translation units are compiled for AVX2 or AVX-512 (per-file
// flags in the CMakeLists.txt of engine/fp8, engine/kernels and engine/model); everything else,
// this file's code included, is built for the baseline ISA.
//
//   scalar  plain C++, the reference every other path is tested against
//   avx2    AVX2 + FMA + F16C (+ POPCNT)
//   avx512  AVX-512 F/BW/VL on top of the above
//
// EMBODY_CPU_PATH=scalar|avx2|avx512|avx512_bf16 forces a path for tests and benchmarks:
// avx512 without the AVX512_BF16 products, avx512_bf16 with them (unset: with them where the CPU
// has them). A forced path the CPU lacks is not taken: the best supported one is, with a warning
// on stderr (a typo or a smaller machine must not turn into SIGILL).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine::cpu {

enum class CpuPath { kScalar, kAvx2, kAvx512 };

const char* CpuPathName(CpuPath path);  // "scalar", "avx2", "avx512"
std::optional<CpuPath> ParseCpuPath(std::string_view name);

// Whether this CPU (and its operating system, which must save the wider registers) runs `path`.
bool CpuSupports(CpuPath path);
// Whether this CPU runs the avx512 path and has AVX512_BF16 (VDPBF16PS, VCVTNE2PS2BF16): a
// capability within the avx512 path, used by the weight-only fp8 product (fp8_matmul.h).
bool CpuSupportsAvx512Bf16();
// Every path this machine runs, scalar first.
std::vector<CpuPath> SupportedCpuPaths();
// Whether this machine runs the path EMBODY_CPU_PATH=`name` asks for (avx512_bf16 included).
bool CpuPathRunsHere(std::string_view name);
// Whether the AVX512_BF16 products may run in this process: the CPU has them and EMBODY_CPU_PATH
// does not say avx512 (decided once, like ActiveCpuPath).
bool Avx512Bf16Enabled();

// The path chosen for this process: decided on first call (EMBODY_CPU_PATH, else the widest
// supported), the same for the rest of the process.
CpuPath ActiveCpuPath();
inline const char* ActiveCpuPathName() { return CpuPathName(ActiveCpuPath()); }

// The choice ActiveCpuPath makes, for a given value of EMBODY_CPU_PATH (nullptr: unset);
// `warning` receives why a forced value was not taken, if it was not.
CpuPath ChooseCpuPath(const char* forced, std::string* warning);

}  // namespace engine::cpu
