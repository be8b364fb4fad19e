// Random inputs the engine's kernel and layer tests share. Header-only; tests only.
#pragma once

#include <cstddef>
#include <vector>

#include "common/rng.h"

namespace engine::testing {

// n values drawn from N(0, scale²) by `rng`.
inline std::vector<float> Random(common::Rng& rng, size_t n, double scale = 1.0) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(scale * rng.Normal());
  return v;
}

}  // namespace engine::testing
