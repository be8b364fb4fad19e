// The padded baseline to packing: consecutive samples form batches of `batch_size`, every sample
// padded to one length, either a fixed length (e.g. the distribution's maximum, 285) or the
// longest sample of its own batch (π0.5-style "pad to the batch's longest"). Reports how many of
// the computed token slots are padding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace engine::data {

struct PaddedBatches {
  int batch_size = 0;
  int num_samples = 0;
  // Batch b holds samples [b·batch_size, min(num_samples, (b+1)·batch_size)), each padded to
  // pad_length[b] tokens.
  std::vector<int32_t> pad_length;
  int64_t real_tokens = 0;
  int64_t padded_tokens = 0;  // real + padding slots

  int num_batches() const { return static_cast<int>(pad_length.size()); }
  int BatchBegin(int b) const { return b * batch_size; }
  int BatchEnd(int b) const { return b + 1 == num_batches() ? num_samples : (b + 1) * batch_size; }
  // Fraction of token slots that are padding: 1 - real / padded (0 for no samples).
  double PaddingRatio() const;
};

// fixed_length > 0: every sample padded to it (a longer sample is InvalidArgument);
// fixed_length == 0: each batch padded to its longest sample. Lengths must be ≥ 1.
common::Result<PaddedBatches> PadBatches(std::span<const int32_t> lengths, int batch_size,
                                         int fixed_length);

}  // namespace engine::data
