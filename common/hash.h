// The two small non-cryptographic hashes the whole tree shares, written once. Each is fully
// specified integer arithmetic, so the same input gives the same bits on every platform and
// build; what they produce is pinned by golden tests (checkpoint trailers, an epoch's sample
// order, synthetic fixtures), so neither may change by a single bit.
//
//  - SplitMix64 (Steele, Lea and Flood, 2014): SplitMix64Mix scrambles one 64-bit word (the
//    generator's finaliser); SplitMix64Next advances a state by the golden gamma and returns the
//    mixed state, the generator common::Rng (common/rng.h) is built on; SplitMix64 is the
//    stateless form, the first output of a generator seeded with x, for hashing a key.
//  - FNV-1a 64 (Fowler, Noll and Vo): the checksum that ends a checkpoint file, word ids for
//    language, a dataset's fingerprint. Chain it over several buffers by passing the previous
//    value as `h`. Raw memory has its own name, Fnv1a64Bytes: were it an overload,
//    Fnv1a64("bar", h) would pick (pointer, length) over string_view and read h bytes.
//
// Neither resists an adversary: for integrity against one use common/crypto.h (SHA-256).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace common {

inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ULL;

constexpr uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t SplitMix64Next(uint64_t& state) {
  state += kSplitMix64Gamma;
  return SplitMix64Mix(state);
}

constexpr uint64_t SplitMix64(uint64_t x) { return SplitMix64Mix(x + kSplitMix64Gamma); }

inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ULL;

inline uint64_t Fnv1a64Bytes(const void* data, size_t n, uint64_t h = kFnv1a64Basis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnv1a64Prime;
  return h;
}

inline uint64_t Fnv1a64(std::string_view bytes, uint64_t h = kFnv1a64Basis) {
  return Fnv1a64Bytes(bytes.data(), bytes.size(), h);
}

}  // namespace common
