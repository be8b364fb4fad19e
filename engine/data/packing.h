// Sequence packing: place samples of varying token length into rows of a fixed token budget,
// each sample whole and in exactly one row, so attention can run per sample (cu_seqlens) with
// no padding inside a row.
//
// Two packers build the same PackedRows:
//  - PackBestFitDecreasing: classic best-fit decreasing, one sample at a time, O(n log budget):
//    samples sorted longest first, each goes to the open row with the least room that still
//    fits it (a bitset over row remainders finds it), else a new row.
//  - PackBestFitDecreasingHistogram: the same decisions taken over a length histogram (Krell et
//    al. 2021 style): all samples of one length are placed in bulk into groups of rows that share
//    a remainder, so the work depends on the number of distinct lengths and remainders, not on n;
//    sample indices are only written out at the end. Rows with equal remainders are
//    interchangeable for every later decision, so it produces the same number of rows and the
//    same multiset of row fills as the exact packer (only which sample of a given length lands
//    in which row differs).
// Samples longer than the budget are an error (InvalidArgument naming the sample), not split:
// splitting a sample would cut attention across its pieces and change what the model computes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace engine::data {

// Rows of packed samples in compressed form. Row r holds the samples
// sample_index[row_begin[r] .. row_begin[r+1]) in order; its cu_seqlens (number of samples + 1
// entries, 0 first, the row's real token count last) start at cu_seqlens[row_begin[r] + r].
struct PackedRows {
  int budget = 0;
  std::vector<int32_t> row_begin{0};  // (num_rows + 1)
  std::vector<int32_t> sample_index;  // (num_samples)
  std::vector<int32_t> cu_seqlens;    // (num_samples + num_rows)
  int64_t real_tokens = 0;

  int num_rows() const { return static_cast<int>(row_begin.size()) - 1; }
  std::span<const int32_t> Row(int r) const {
    return {sample_index.data() + row_begin[r],
            static_cast<size_t>(row_begin[r + 1] - row_begin[r])};
  }
  std::span<const int32_t> CuSeqlens(int r) const {
    return {cu_seqlens.data() + row_begin[r] + r,
            static_cast<size_t>(row_begin[r + 1] - row_begin[r] + 1)};
  }
  int RowTokens(int r) const { return CuSeqlens(r).back(); }
  // Real tokens / (rows × budget); 1 for no rows.
  double Efficiency() const;
};

// Both packers: every length must be in [1, budget], budget ≥ 1.
common::Result<PackedRows> PackBestFitDecreasing(std::span<const int32_t> lengths, int budget);
common::Result<PackedRows> PackBestFitDecreasingHistogram(std::span<const int32_t> lengths,
                                                          int budget);

// Checks the invariants a consumer relies on: every sample placed exactly once, no row over
// the budget, cu_seqlens matching the lengths. For tests and for data read back from disk.
common::Status ValidatePacking(const PackedRows& packed, std::span<const int32_t> lengths);

}  // namespace engine::data
