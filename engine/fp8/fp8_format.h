// The two OCP 8-bit floating-point formats (OCP 8-bit Floating Point Specification, "OFP8") and
// their scalar reference codecs: every vectorised path (engine/fp8/kernels_*.cc) must agree with
// these bit for bit.
//
//   E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits. Max finite 448 (S.1111.110), min
//         normal 2^-6, min subnormal 2^-9. No infinities; NaN only at S.1111.111.
//   E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits: the top byte of an IEEE half. Max
//         finite 57344 (S.11110.11), min normal 2^-14, min subnormal 2^-16; ±inf at S.11111.00,
//         NaN at S.11111.{01,10,11}.
//
// float → fp8 rounds to nearest, ties to even, and saturates ("satfinite"), for both formats:
//   - a finite value beyond the largest finite code becomes ±max;
//   - ±inf becomes ±max, for E5M2 too (it has an infinity, but a gradient or weight that
//     overflowed is better carried as the largest value than as an inf that poisons every sum
//     it enters; the overflow is counted as "saturated" by the block quantiser instead);
//   - NaN becomes NaN with the input's sign: S.1111.111 (0x7f/0xff) for E4M3, S.11111.11
//     (0x7f/0xff) for E5M2; payloads are not kept;
//   - the sign of zero is kept, also for values that round to zero (-1e-30 → 0x80).
// fp8 → float is exact (every fp8 value is a float); E5M2's ±inf decode to ±inf.
//
// Only translation units built with the project's default flags include this header: the
// per-ISA kernel files must not instantiate these inline functions (one copy of an inline
// function is kept at link time, and an AVX-512 copy must never serve the scalar path).
#pragma once

#include <bit>
#include <cstdint>

#include "engine/fp8/fp8_constants.h"

namespace engine::fp8 {

const char* FormatName(Format format);  // "e4m3" / "e5m2"

// Largest finite value of a format: 448 or 57344.
constexpr float MaxFinite(Format f) { return f == Format::kE4M3 ? 448.0f : 57344.0f; }

// The code of the largest finite positive value, and the canonical NaN code (sign bit clear).
constexpr uint8_t MaxFiniteCode(Format f) { return f == Format::kE4M3 ? 0x7e : 0x7b; }
constexpr uint8_t kNanCode = 0x7f;  // both formats

constexpr const FormatBits& Bits(Format f) { return f == Format::kE4M3 ? kE4M3Bits : kE5M2Bits; }

// True for the codes that decode to NaN.
constexpr bool IsNanCode(Format f, uint8_t code) {
  const uint8_t mag = code & 0x7f;
  return f == Format::kE4M3 ? mag == 0x7f : mag > 0x7c;
}

// fp8 → float, exact.
inline float DecodeScalar(Format f, uint8_t code) {
  const FormatBits& b = Bits(f);
  const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
  const uint32_t mag = code & 0x7f;
  if (IsNanCode(f, code)) return std::bit_cast<float>(sign | 0x7fc00000u);
  if (f == Format::kE5M2 && mag == 0x7c) return std::bit_cast<float>(sign | 0x7f800000u);
  float v;
  if (mag < (1u << b.mantissa_bits)) {
    // Subnormal (or zero): mag units of the smallest subnormal, a power of two.
    v = static_cast<float>(mag) * std::bit_cast<float>(b.subnormal_step_bits);
  } else {
    v = std::bit_cast<float>((mag << (23 - b.mantissa_bits)) + b.rebias_bits);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
}

// float → fp8, round to nearest even with saturation (see the top of this file).
inline uint8_t EncodeScalar(Format f, float x) {
  const FormatBits& b = Bits(f);
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | kNanCode;
  if (a > b.max_bits) a = b.max_bits;  // saturate, ±inf included
  uint32_t mag;
  if (a < b.min_normal_bits) {
    // Adding a float whose ulp is the format's subnormal step lets the FPU round to nearest
    // even at exactly that step; the difference of the bit patterns counts the steps.
    const float magic = std::bit_cast<float>(b.subnormal_magic_bits);
    mag = std::bit_cast<uint32_t>(std::bit_cast<float>(a) + magic) - b.subnormal_magic_bits;
  } else {
    // Round the float's mantissa to mantissa_bits (nearest, ties to even: add half an ulp
    // less one, plus the kept LSB), then move the exponent to the format's bias. A carry out
    // of the mantissa correctly bumps the exponent.
    const uint32_t shift = 23 - b.mantissa_bits;
    const uint32_t r = a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1);
    mag = (r - b.rebias_bits) >> shift;
  }
  return sign | static_cast<uint8_t>(mag);
}

}  // namespace engine::fp8
