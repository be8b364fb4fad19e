#include "engine/data/padded_batching.h"

#include <algorithm>
#include <string>

namespace engine::data {

double PaddedBatches::PaddingRatio() const {
  return padded_tokens == 0
             ? 0.0
             : 1.0 - static_cast<double>(real_tokens) / static_cast<double>(padded_tokens);
}

common::Result<PaddedBatches> PadBatches(std::span<const int32_t> lengths, int batch_size,
                                         int fixed_length) {
  if (batch_size < 1) return common::InvalidArgument("batch_size must be ≥ 1", "batch_size");
  if (fixed_length < 0) return common::InvalidArgument("fixed_length must be ≥ 0", "fixed_length");
  PaddedBatches out;
  out.batch_size = batch_size;
  out.num_samples = static_cast<int>(lengths.size());
  for (size_t begin = 0; begin < lengths.size(); begin += batch_size) {
    const size_t end = std::min(lengths.size(), begin + batch_size);
    int32_t longest = 0;
    for (size_t i = begin; i < end; ++i) {
      if (lengths[i] < 1 || (fixed_length > 0 && lengths[i] > fixed_length)) {
        return common::InvalidArgument(
            "sample " + std::to_string(i) + " has " + std::to_string(lengths[i]) +
                " tokens; padding needs at least 1" +
                (fixed_length > 0 ? " and at most " + std::to_string(fixed_length) : std::string()),
            "lengths[" + std::to_string(i) + "]");
      }
      longest = std::max(longest, lengths[i]);
      out.real_tokens += lengths[i];
    }
    const int32_t pad = fixed_length > 0 ? fixed_length : longest;
    out.pad_length.push_back(pad);
    out.padded_tokens += static_cast<int64_t>(pad) * static_cast<int64_t>(end - begin);
  }
  return out;
}

}  // namespace engine::data
