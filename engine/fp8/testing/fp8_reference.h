// Test helpers for engine/fp8: the formats written out from their definition (independent of
// the bit tricks in fp8_format.h), a nearest-value encoder that searches all codes, a float32
// reference matmul and Gaussian inputs.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_path.h"
#include "engine/fp8/fp8_constants.h"

namespace engine::fp8::testing {

struct FormatDef {
  int exponent_bits, mantissa_bits, bias;
  bool has_inf;
};

inline FormatDef Def(Format f) {
  return f == Format::kE4M3 ? FormatDef{4, 3, 7, false} : FormatDef{5, 2, 15, true};
}

// The value of a code straight from the OCP definition; NaN for NaN codes.
inline double ReferenceValue(Format f, uint8_t code) {
  const FormatDef d = Def(f);
  const int sign = code >> 7;
  const int e = (code >> d.mantissa_bits) & ((1 << d.exponent_bits) - 1);
  const int m = code & ((1 << d.mantissa_bits) - 1);
  const int e_max = (1 << d.exponent_bits) - 1;
  double mag;
  if (d.has_inf && e == e_max) {
    mag =
        m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!d.has_inf && e == e_max && m == (1 << d.mantissa_bits) - 1) {
    mag = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    mag = std::ldexp(static_cast<double>(m), 1 - d.bias - d.mantissa_bits);
  } else {
    mag = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -d.mantissa_bits), e - d.bias);
  }
  return sign ? -mag : mag;
}

// Round to nearest over every finite code, ties to the even code, sign kept, NaN → 0x7f|sign:
// what the codecs must do, found by exhaustive search instead of bit manipulation.
inline uint8_t NearestCode(Format f, float x) {
  struct Table {
    double value[128];
    int max_code;  // the largest finite positive code
  };
  static const std::array<Table, 2> tables = [] {
    std::array<Table, 2> t;
    for (int i = 0; i < 2; ++i) {
      const Format fi = i == 0 ? Format::kE4M3 : Format::kE5M2;
      for (int c = 0; c < 128; ++c) t[i].value[c] = ReferenceValue(fi, static_cast<uint8_t>(c));
      t[i].max_code = 127;
      while (!std::isfinite(t[i].value[t[i].max_code])) --t[i].max_code;
    }
    return t;
  }();
  const Table& t = tables[f == Format::kE4M3 ? 0 : 1];
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7f;
  const double a = std::fabs(static_cast<double>(x));
  // Past the largest finite value that value is the nearest (and distances to two candidates
  // ~1e38 away could round to a false tie in double).
  if (a >= t.value[t.max_code]) return sign | static_cast<uint8_t>(t.max_code);
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= t.max_code; ++c) {
    const double d = std::fabs(t.value[c] - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return sign | static_cast<uint8_t>(best);
}

// y (M, N) = x (M, K) · w (N, K)ᵀ, accumulated in double.
inline std::vector<float> ReferenceMatmul(const std::vector<float>& x, const std::vector<float>& w,
                                          int M, int N, int K) {
  std::vector<float> y(static_cast<size_t>(M) * N);
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) {
        acc += static_cast<double>(x[static_cast<size_t>(m) * K + k]) *
               w[static_cast<size_t>(n) * K + k];
      }
      y[static_cast<size_t>(m) * N + n] = static_cast<float>(acc);
    }
  }
  return y;
}

inline std::string PathTestName(cpu::CpuPath p) { return cpu::CpuPathName(p); }

// n values drawn from N(0, stddev²) by std::mt19937 seeded with `seed`.
inline std::vector<float> Gaussian(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace engine::fp8::testing
