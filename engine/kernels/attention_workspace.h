// AttentionWorkspace: the scratch memory of the attention kernels, owned by the caller and reused
// across calls so the kernels never allocate in the steady state. A kernel asks for what it needs
// for the current shape; the buffer grows to the largest request seen and never shrinks.
//
// One workspace per thread: kernels write into it, so two concurrent calls must not share one.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

namespace engine::kernels {

class AttentionWorkspace {
 public:
  // Returns at least `floats` floats, 64-byte aligned, contents unspecified. Valid until the next
  // Reserve. Allocates only when `floats` exceeds every earlier request.
  float* Reserve(size_t floats);
  size_t capacity_floats() const { return storage_.empty() ? 0 : storage_.size() - kAlignFloats; }
  int allocations() const { return allocations_; }

 private:
  static constexpr size_t kAlignFloats = 16;  // 64 bytes
  std::vector<float> storage_;
  int allocations_ = 0;
};

// Carves consecutive 64-byte-aligned slices out of a workspace: first Add() every slice, then
// Bind() once, then read the pointers. Lives on the stack; at most kMaxSlices slices.
class WorkspaceLayout {
 public:
  // Registers a slice of `floats` floats and returns where its pointer will be written.
  // Out of line, like everything here: the per-ISA kernel copies call these, and an inline
  // member would be one symbol shared by the copies (see tile_ops.h).
  void Add(float** slot, size_t floats);
  void Bind(AttentionWorkspace* ws);

 private:
  struct Slot {
    float** slot;
    size_t offset;
  };
  static constexpr int kMaxSlices = 16;
  std::array<Slot, kMaxSlices> slots_{};
  int num_slots_ = 0;
  size_t offset_ = 0;
};

}  // namespace engine::kernels
