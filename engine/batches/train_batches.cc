#include "engine/batches/train_batches.h"

#include <algorithm>
#include <cmath>

#include "engine/model/policy_layers.h"
#include "engine/sim/reach_samples.h"

namespace engine {

int SamplesPerRank(const api::EngineOptions& e) {
  return SamplesPerRank(e, data::EmbodiedLengthConfig{}.MeanTokens() + e.model.action_horizon);
}

int SamplesPerRank(const api::EngineOptions& e, double mean) {
  if (!e.data.packing) return e.data.rows_per_step;
  const double fit = static_cast<double>(e.data.rows_per_step) * e.data.tokens_per_row / mean;
  return std::max(1, static_cast<int>(std::floor(fit)));
}

data::PlanConfig PlanConfigFor(const api::EngineOptions& e, int rank, int world,
                               std::shared_ptr<const data::DatasetStream> dataset) {
  data::PlanConfig p;
  p.seed = e.seed;
  const int per_rank =
      dataset != nullptr ? SamplesPerRank(e, dataset->MeanTokens()) : SamplesPerRank(e);
  p.samples_per_step = static_cast<int64_t>(per_rank) * world;
  p.dataset = std::move(dataset);
  p.rank = rank;
  p.world = world;
  p.tokens_per_row = e.data.tokens_per_row;
  p.action_tokens = e.model.action_horizon;
  return p;
}

namespace {

// Lays out out->samples (filled by the caller) packed or padded, and builds the model's batch.
common::Status LayOutTrainBatch(const PolicyConfig& model, bool packing,
                                const data::PackedPlan& plan, TrainBatch* out) {
  const int n = plan.num_samples();
  out->lengths.resize(n);
  int longest = 1;
  for (int i = 0; i < n; ++i) {
    out->lengths[i] = out->samples[i].NumTokens(model.action_horizon);
    if (out->lengths[i] != plan.lengths[i]) {
      return common::Internal("sample " + std::to_string(plan.SampleId(i)) + " has " +
                              std::to_string(out->lengths[i]) + " tokens, its plan says " +
                              std::to_string(plan.lengths[i]));
    }
    longest = std::max(longest, out->lengths[i]);
  }
  const data::PackedRows* rows = &plan.rows;
  if (!packing) {
    data::PackedRows& p = out->padded_rows;
    p.budget = longest;
    p.row_begin.assign(1, 0);
    p.sample_index.clear();
    p.cu_seqlens.clear();
    p.real_tokens = 0;
    for (int i = 0; i < n; ++i) {
      p.sample_index.push_back(i);
      p.row_begin.push_back(i + 1);
      p.cu_seqlens.push_back(0);
      p.cu_seqlens.push_back(out->lengths[i]);
      p.real_tokens += out->lengths[i];
    }
    rows = &p;
  }
  EMBODY_RETURN_IF_ERROR(BuildPackedBatchInto(out->samples, *rows, model.action_horizon,
                                              model.action_dim, &out->batch));
  out->real_tokens = rows->real_tokens;
  out->slots = static_cast<int64_t>(out->batch.num_slots());
  out->useful_flops = StepFlops(model, out->batch);
  return common::Status::Ok();
}

}  // namespace

common::Status FillTrainBatch(const DemoSource& task, const PolicyConfig& model, bool packing,
                              const data::PackedPlan& plan, TrainBatch* out) {
  const int n = plan.num_samples();
  out->samples.resize(n);
  for (int i = 0; i < n; ++i) {
    task.MakeSample(plan.SampleId(i), plan.sample_seeds[i], plan.compositions[i], model.vocab,
                    &out->samples[i]);
  }
  return LayOutTrainBatch(model, packing, plan, out);
}

DatasetSampleReader::DatasetSampleReader(const DatasetSource& source, const data::PlanConfig& plan,
                                         uint64_t first_sample, int64_t num_steps,
                                         storage::ReadAheadOptions options) {
  uint64_t begin = 0, end = 0;
  data::RankSlice(0, plan.samples_per_step, plan.rank, plan.world, &begin, &end);
  const uint64_t per_step = end - begin;
  const uint64_t count = per_step * static_cast<uint64_t>(std::max<int64_t>(0, num_steps));
  const uint64_t global_step = static_cast<uint64_t>(plan.samples_per_step);
  const uint64_t seed = plan.seed;
  std::shared_ptr<const data::DatasetStream> stream = plan.dataset;
  ahead_ = std::make_unique<storage::ReadAhead<Item>>(
      count,
      [&source, stream, first_sample, per_step, global_step, begin,
       seed](uint64_t i) -> common::Result<Item> {
        Item item;
        item.global = first_sample + (i / per_step) * global_step + begin + i % per_step;
        EMBODY_RETURN_IF_ERROR(source.MakeSample(
            stream->SampleAt(item.global), data::SampleSeed(seed, item.global), &item.sample));
        return item;
      },
      options);
}

common::Status DatasetSampleReader::Next(uint64_t global_index, PolicySample* out) {
  EMBODY_ASSIGN_OR_RETURN(item, ahead_->Next());
  if (!item.has_value()) return common::Internal("dataset reader: no more samples");
  if (item->global != global_index) {
    return common::Internal("dataset reader: sample " + std::to_string(item->global) +
                            " read where the plan wants " + std::to_string(global_index));
  }
  *out = std::move(item->sample);
  return common::Status::Ok();
}

common::Status FillDatasetBatch(DatasetSampleReader& reader, const PolicyConfig& model,
                                bool packing, const data::PackedPlan& plan, TrainBatch* out) {
  const int n = plan.num_samples();
  out->samples.resize(n);
  for (int i = 0; i < n; ++i)
    EMBODY_RETURN_IF_ERROR(reader.Next(plan.SampleId(i), &out->samples[i]));
  return LayOutTrainBatch(model, packing, plan, out);
}

double StepFlops(const PolicyConfig& m, const PackedBatch& b) {
  const double C = m.d_model, M = m.mlp, A = m.action_dim;
  double real = 0.0, attention = 0.0;
  for (int r = 0; r < b.rows; ++r) {
    auto cu = b.CuSeqlens(r);
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const double len = cu[s + 1] - cu[s];
      real += len;
      attention += 4.0 * len * len * C;
    }
  }
  if (m.causal) attention *= 0.5;
  const double patches = static_cast<double>(b.patches.size() / kPatchDim);
  const double states = static_cast<double>(b.states.size() / kStateDim);
  const double actions = b.num_actions();
  const double forward = m.layers * (2.0 * real * (4.0 * C * C + 2.0 * C * M) + attention) +
                         2.0 * patches * kPatchDim * C + 2.0 * states * kStateDim * C +
                         2.0 * actions * (A + kTimeFeatures) * C + 2.0 * actions * C * A;
  return 3.0 * forward;
}

}  // namespace engine
