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

void WorkspaceLayout::Add(float** slot, size_t floats) {
  slots_.at(num_slots_++) = {slot, offset_};  // throws past kMaxSlices: a bug
  offset_ += (floats + 15) / 16 * 16;
}

void WorkspaceLayout::Bind(AttentionWorkspace* ws) {
  float* base = ws->Reserve(offset_);
  for (int i = 0; i < num_slots_; ++i) *slots_[i].slot = base + slots_[i].offset;
}

}  // namespace engine::kernels
