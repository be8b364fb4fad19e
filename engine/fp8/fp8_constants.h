// The fp8 formats as numbers only (no functions), shared by the scalar codec (fp8_format.h) and
// the per-ISA kernel files, which may include nothing that defines inline functions.
#pragma once

#include <cstdint>

namespace engine::fp8 {

enum class Format : uint8_t { kE4M3, kE5M2 };

// Float bit patterns that drive the bit-level codecs (all positive, so they order like ints).
struct FormatBits {
  uint32_t mantissa_bits;         // 3 or 2
  uint32_t max_bits;              // the largest finite value, 448 or 57344
  uint32_t saturate_above_bits;   // half an ulp above max (464, 61440): past it RNE would overflow
  uint32_t min_normal_bits;       // 2^-6 or 2^-14
  uint32_t subnormal_step_bits;   // the smallest subnormal: 2^-9 or 2^-16
  uint32_t subnormal_magic_bits;  // a float whose ulp is that step: 2^14 or 2^7
  uint32_t rebias_bits;           // (127 - bias) << 23: float exponent to format exponent
};

inline constexpr FormatBits kE4M3Bits{3,           0x43E00000u, 0x43E80000u, 0x3C800000u,
                                      0x3B000000u, 0x46800000u, 0x3C000000u};
inline constexpr FormatBits kE5M2Bits{2,           0x47600000u, 0x47700000u, 0x38800000u,
                                      0x37800000u, 0x43000000u, 0x38000000u};

// Elements per block along the contraction dimension (both operands of the matmul), and rows
// per weight block: 128 × 128 weight blocks, 1 × 128 activation tiles.
inline constexpr int kBlock = 128;

}  // namespace engine::fp8
