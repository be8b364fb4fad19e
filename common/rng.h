// Rng: a small, fully specified random number generator (SplitMix64, common/hash.h), the one the
// engine and the data layer draw from.
//
// The standard library's distributions are implementation-defined, so the same seed could give
// different samples on different toolchains; everything drawn (initial weights, synthetic
// demonstrations, simulated tasks, an epoch's sample order) goes through this class instead,
// which gives bitwise identical streams everywhere. Not cryptographic.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/hash.h"

namespace common {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // A stream keyed by several integers (seed, rank, step, index): streams for different keys are
  // statistically independent.
  static Rng ForKey(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0) {
    uint64_t s = SplitMix64(a);
    s = SplitMix64Mix(s ^ (b + 0x632be59bd9b4e019ULL));
    s = SplitMix64Mix(s ^ (c + 0x85ebca77c2b2ae63ULL));
    s = SplitMix64Mix(s ^ (d + 0xc2b2ae3d27d4eb4fULL));
    return Rng(s);
  }

  uint64_t NextU64() { return SplitMix64Next(state_); }
  // Uniform in [0, bound), bound ≥ 1, without modulo bias: draws in the short last stripe of
  // the 64-bit range are rejected.
  uint64_t Below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    for (;;) {
      const uint64_t x = NextU64();
      if (x < limit) return x % bound;
    }
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Standard normal (Box-Muller; the second value is discarded to keep the stream simple).
  double Normal() {
    double u1 = Uniform();
    double u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace common
