#include "engine/kernels/attention_workspace.h"

#include <cstdint>

namespace engine::kernels {

float* AttentionWorkspace::Reserve(size_t floats) {
  if (floats > capacity_floats()) {
    storage_.assign(floats + kAlignFloats, 0.0f);
    ++allocations_;
  }
  const auto addr = reinterpret_cast<uintptr_t>(storage_.data());
  const uintptr_t aligned = (addr + 63) & ~static_cast<uintptr_t>(63);
  return storage_.data() + (aligned - addr) / sizeof(float);
}

}  // namespace engine::kernels
