// The sample stream of a finite dataset, in the shape the loader plans from (loader.h): one
// endless sequence of global indices g = 0, 1, 2, ... shared by all ranks, where
//
//   epoch(g) = g / N,   position in the epoch = g % N,
//   sample(g) = storage::EpochOrder(N, seed, epoch(g))[g % N]
//
// for a dataset of N samples: every epoch visits every sample once, in an order shuffled by
// (seed, epoch) (storage/partition.h's Fisher-Yates over SplitMix64, the same on every rank and
// platform). A step takes the next samples_per_step indices and each rank its contiguous slice
// of them (loader.h), so per epoch the ranks' parts are disjoint and together cover the dataset,
// and the data position stays one number, valid on any number of ranks.
//
// Why not storage::Partition's per-epoch parts (rank r reads positions [⌊rN/W⌋, ⌊(r+1)N/W⌋) of
// the whole epoch)? The step's global batch would then depend on W, and a run resumed on W'
// ranks mid-epoch would have to reconstruct which samples W ranks had consumed. Splitting each
// step's slice of the shared epoch order instead makes a step's global batch the same for every
// W: a resumed run continues with exactly the batches the interrupted one would have taken.
//
// Packing needs only lengths: tokens(sample) comes from a table computed when the dataset is
// opened (engine/batches/dataset_source.h), from the shard indexes, without reading data.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace engine::data {

class DatasetStream {
 public:
  // tokens[s]: packed length of dataset sample s (action tokens included); N = tokens.size() ≥ 1.
  DatasetStream(uint64_t seed, std::vector<int32_t> tokens);

  uint64_t samples() const { return tokens_.size(); }
  uint64_t seed() const { return seed_; }
  int32_t Tokens(uint64_t sample) const { return tokens_[sample]; }
  int32_t MaxTokens() const { return max_tokens_; }
  double MeanTokens() const { return mean_tokens_; }

  uint64_t Epoch(uint64_t g) const { return g / samples(); }
  uint64_t InEpoch(uint64_t g) const { return g % samples(); }
  // The dataset sample at global index g. Safe from any thread; the orders of the two most
  // recent epochs are kept (a step may straddle an epoch boundary; readers run a little ahead).
  uint64_t SampleAt(uint64_t g) const;

 private:
  std::shared_ptr<const std::vector<uint64_t>> Order(uint64_t epoch) const;

  const uint64_t seed_;
  const std::vector<int32_t> tokens_;
  int32_t max_tokens_ = 0;
  double mean_tokens_ = 0.0;
  mutable std::mutex mu_;
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<const std::vector<uint64_t>>>> orders_;
};

}  // namespace engine::data
