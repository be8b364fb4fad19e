#include "engine/data/loader.h"

#include <string>

#include "common/hash.h"

namespace engine::data {

uint64_t SampleSeed(uint64_t seed, uint64_t index) {
  return common::SplitMix64Mix(common::SplitMix64(seed) ^ (index + 0x632BE59BD9B4E019ull));
}

void RankSlice(uint64_t first, int64_t count, int rank, int world, uint64_t* begin, uint64_t* end) {
  const auto c = static_cast<uint64_t>(count);
  *begin = first + c * static_cast<uint64_t>(rank) / static_cast<uint64_t>(world);
  *end = first + c * static_cast<uint64_t>(rank + 1) / static_cast<uint64_t>(world);
}

common::Status ValidatePlanConfig(const PlanConfig& c) {
  if (c.world < 1 || c.rank < 0 || c.rank >= c.world) {
    return common::InvalidArgument("rank " + std::to_string(c.rank) + " of world " +
                                       std::to_string(c.world) + " is not a valid rank",
                                   "rank");
  }
  if (c.samples_per_step < c.world) {
    return common::InvalidArgument("samples_per_step " + std::to_string(c.samples_per_step) +
                                       " is less than the world size " + std::to_string(c.world) +
                                       ": every rank needs at least one sample",
                                   "samples_per_step");
  }
  if (c.action_tokens < 0) {
    return common::InvalidArgument("action_tokens must be >= 0", "action_tokens");
  }
  if (c.dataset != nullptr && c.dataset->samples() == 0) {
    return common::InvalidArgument("the dataset has no samples", "dataset");
  }
  const int longest =
      c.dataset != nullptr ? c.dataset->MaxTokens() : c.lengths.MaxTokens() + c.action_tokens;
  if (c.tokens_per_row < longest) {
    return common::InvalidArgument("tokens_per_row " + std::to_string(c.tokens_per_row) +
                                       " is below the longest sample (" + std::to_string(longest) +
                                       " tokens)",
                                   "tokens_per_row");
  }
  return common::Status::Ok();
}

common::Result<PackedPlan> MakePlan(const PlanConfig& config, int64_t step, uint64_t first_sample) {
  EMBODY_RETURN_IF_ERROR(ValidatePlanConfig(config));
  PackedPlan p;
  p.step = step;
  p.global_begin = first_sample;
  p.global_end = first_sample + static_cast<uint64_t>(config.samples_per_step);
  RankSlice(first_sample, config.samples_per_step, config.rank, config.world, &p.local_begin,
            &p.local_end);
  const size_t n = p.local_end - p.local_begin;
  p.sample_seeds.resize(n);
  p.lengths.resize(n);
  if (config.dataset != nullptr) {
    p.dataset_samples.resize(n);
    for (size_t i = 0; i < n; ++i) {
      p.sample_seeds[i] = SampleSeed(config.seed, p.local_begin + i);
      p.dataset_samples[i] = config.dataset->SampleAt(p.local_begin + i);
      p.lengths[i] = config.dataset->Tokens(p.dataset_samples[i]);
    }
  }
  if (config.dataset == nullptr) p.compositions.resize(n);
  for (size_t i = 0; config.dataset == nullptr && i < n; ++i) {
    p.sample_seeds[i] = SampleSeed(config.seed, p.local_begin + i);
    // One sampler per sample, seeded by the sample: the composition depends on the index alone,
    // not on which samples came before it on this rank.
    EmbodiedLengthSampler sampler(p.sample_seeds[i], config.lengths);
    p.compositions[i] = sampler.Next();
    p.lengths[i] = p.compositions[i].NumTokens() + config.action_tokens;
  }
  auto rows = PackBestFitDecreasing(p.lengths, config.tokens_per_row);
  if (!rows.ok()) return rows.status();
  p.rows = std::move(rows).value();
  return p;
}

}  // namespace engine::data
