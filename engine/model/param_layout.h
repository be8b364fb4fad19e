// ParamLayout: the names, shapes and offsets of a model's tensors inside its one flat parameter
// buffer (and the gradient buffer, which has the same layout). Checkpoints, the PyTorch golden
// test and debugging tools address tensors by name through it; the optimizer and the gradient
// all-reduce see only the flat buffer.
//
// Offsets are aligned to 16 floats (64 bytes) so every tensor starts on a cache line; the gaps
// between tensors hold zeros in both buffers and never change (their gradient is always zero).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

struct ParamTensor {
  std::string name;        // e.g. "blocks.0.attn.qkv.weight"
  std::vector<int> shape;  // row-major, PyTorch's convention ((out, in) for Linear weights)
  size_t offset = 0;       // in floats from the start of the buffer
  size_t size = 0;         // product of shape
};

class ParamLayout {
 public:
  // Appends a tensor; returns its offset. Names must be unique (a duplicate is a bug: aborts).
  size_t Add(std::string name, std::vector<int> shape);

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // nullptr when no tensor has that name.
  const ParamTensor* Find(std::string_view name) const;
  // Floats the buffer needs, gaps included.
  size_t total_floats() const { return total_; }
  // Sum of the tensors' sizes (what "parameters" counts): no gaps.
  size_t num_parameters() const;

 private:
  std::vector<ParamTensor> tensors_;
  size_t total_ = 0;
};

}  // namespace engine
