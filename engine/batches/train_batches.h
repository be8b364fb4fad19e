// Training batches of the policy transformer: how a job's data options become per-step sample
// counts and loader plans, and how the loader thread turns one plan into the model's PackedBatch
// (the fill function of data::Loader<TrainBatch>).
//
// Layout per step and rank (api::DataOptions):
//   packing on   the plan's best-fit-decreasing rows of tokens_per_row (varlen attention);
//   packing off  one sample per row, every row padded to the step's longest sample (π0.5-style
//                "pad to the batch's longest"), for the padded baseline or varlen without packing.
// Both lay out the same samples, and the model computes the same function on either.
//
// A TrainBatch is recycled by the loader: every buffer is cleared and refilled, never freed, so
// once the largest step has been seen a fill allocates no large buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/data/loader.h"
#include "engine/batches/dataset_source.h"
#include "engine/model/packed_batch.h"
#include "engine/model/policy_transformer.h"
#include "engine/sim/reach_task.h"

namespace engine {

struct TrainBatch {
  std::vector<PolicySample> samples;  // local sample i of the plan
  std::vector<int32_t> lengths;       // their token counts
  data::PackedRows padded_rows;       // the one-sample-per-row layout (packing off)
  PackedBatch batch;
  int64_t real_tokens = 0;    // tokens of real samples
  int64_t slots = 0;          // rows × tokens_per_row the model computes over
  double useful_flops = 0.0;  // forward + backward FLOPs on real tokens (StepFlops)
};

// Samples each rank takes per step (see api::DataOptions::rows_per_step), for samples of the
// built-in stream, or of a dataset whose mean packed length is `mean_sample_tokens`.
int SamplesPerRank(const api::EngineOptions& e);
int SamplesPerRank(const api::EngineOptions& e, double mean_sample_tokens);

// The loader's plan configuration for `rank` of `world`: the built-in stream, or `dataset`'s.
data::PlanConfig PlanConfigFor(const api::EngineOptions& e, int rank, int world,
                               std::shared_ptr<const data::DatasetStream> dataset = nullptr);

// Materialises `plan` into *out: each sample from the task (DemoSource::MakeSample), laid out
// packed or padded as `packing` says; language ids stay below model.vocab.
common::Status FillTrainBatch(const DemoSource& task, const PolicyConfig& model, bool packing,
                              const data::PackedPlan& plan, TrainBatch* out);

// This rank's dataset samples for the steps a Loader will plan (first_sample, num_steps and
// `plan` as given to it), read from the shards and decoded (DatasetSource::MakeSample) ahead of
// the loader by background threads (storage::ReadAhead), and handed out in plan order. The read
// order is known in advance because a plan is a pure function of its step.
class DatasetSampleReader {
 public:
  DatasetSampleReader(const DatasetSource& source, const data::PlanConfig& plan,
                      uint64_t first_sample, int64_t num_steps, storage::ReadAheadOptions options);
  // Moves the next sample into *out. `global_index` is the plan's index for it; a mismatch is an
  // internal error. A read error (naming the shard file and episode) ends the stream.
  common::Status Next(uint64_t global_index, PolicySample* out);
  // Times the loader found its sample not yet decoded.
  uint64_t waits() const { return ahead_->waits(); }

 private:
  struct Item {
    uint64_t global = 0;
    PolicySample sample;
  };
  std::unique_ptr<storage::ReadAhead<Item>> ahead_;
};

// Materialises a dataset plan: its samples from `reader`, laid out as FillTrainBatch does.
common::Status FillDatasetBatch(DatasetSampleReader& reader, const PolicyConfig& model,
                                bool packing, const data::PackedPlan& plan, TrainBatch* out);

// Useful FLOPs of one training step (forward + backward = 3 × forward) of `model` on the real
// tokens of `batch`: every matrix product (embeddings' linears, the blocks' QKV, output
// projection and MLP, the action head) and attention within each sample (QKᵀ and PV, 4·n²·C per
// layer for a sample of n tokens, halved when causal). Padding slots and elementwise work are
// not counted.
double StepFlops(const PolicyConfig& model, const PackedBatch& batch);

}  // namespace engine
