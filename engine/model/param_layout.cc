#include "engine/model/param_layout.h"

#include <cstdio>
#include <cstdlib>

namespace engine {

size_t ParamLayout::Add(std::string name, std::vector<int> shape) {
  if (Find(name) != nullptr) {
    std::fprintf(stderr, "ParamLayout: duplicate tensor name %s\n", name.c_str());
    std::abort();
  }
  size_t size = 1;
  for (int d : shape) size *= static_cast<size_t>(d);
  const size_t offset = (total_ + 15) / 16 * 16;
  tensors_.push_back({std::move(name), std::move(shape), offset, size});
  total_ = offset + size;
  return offset;
}

const ParamTensor* ParamLayout::Find(std::string_view name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

size_t ParamLayout::num_parameters() const {
  size_t n = 0;
  for (const ParamTensor& t : tensors_) n += t.size;
  return n;
}

}  // namespace engine
