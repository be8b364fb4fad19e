// Bulk fp8 conversion of arrays on the CPU path chosen at run time (engine/cpu/cpu_path.h), with
// the rounding, saturation and NaN rules of fp8_format.h. Every path gives the same bits.
//
//   EncodeFp8: out[i] = fp8(in[i] · inv_scale), counting saturated, underflowed and NaN inputs
//   DecodeFp8: out[i] = float(in[i]) · scale
//
// `path` defaults to the process's path; passing another one is for tests and benchmarks, and
// must be one the CPU runs (cpu::CpuSupports), else the process aborts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cpu/cpu_path.h"
#include "engine/fp8/fp8_constants.h"
#include "engine/fp8/kernels.h"

namespace engine::fp8 {

void EncodeFp8(Format format, const float* in, size_t n, uint8_t* out, float inv_scale = 1.0f,
               EncodeCounts* counts = nullptr, cpu::CpuPath path = cpu::ActiveCpuPath());

void DecodeFp8(Format format, const uint8_t* in, size_t n, float* out, float scale = 1.0f,
               cpu::CpuPath path = cpu::ActiveCpuPath());

// The largest |in[i]| over the finite elements (NaN and ±inf skipped); 0 if none.
float FiniteAmax(const float* in, size_t n, cpu::CpuPath path = cpu::ActiveCpuPath());

}  // namespace engine::fp8
