#include "engine/fp8/codec.h"

#include "engine/fp8/fp8_format.h"

namespace engine::fp8 {

void EncodeFp8(Format format, const float* in, size_t n, uint8_t* out, float inv_scale,
               EncodeCounts* counts, cpu::CpuPath path) {
  KernelsFor(path).encode(format, in, static_cast<long>(n), inv_scale, out, counts);
}

void DecodeFp8(Format format, const uint8_t* in, size_t n, float* out, float scale,
               cpu::CpuPath path) {
  KernelsFor(path).decode(format, in, static_cast<long>(n), scale, out);
}

float FiniteAmax(const float* in, size_t n, cpu::CpuPath path) {
  return KernelsFor(path).finite_amax(in, static_cast<long>(n));
}

const char* FormatName(Format format) { return format == Format::kE4M3 ? "e4m3" : "e5m2"; }

}  // namespace engine::fp8
