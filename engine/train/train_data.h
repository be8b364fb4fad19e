// TrainData: where a training run's batches come from, on each rank.
//
// The sample stream is global (engine/data/loader.h): the built-in stream of the job's sim:
// dataset (a DemoSource, engine/sim/demo_source.h), or the shuffled epochs of a dataset
// directory (engine/data/dataset_stream.h) that every rank opens itself and whose samples
// background threads read and decode ahead of the loader (DatasetSampleReader). Each step takes
// the next samples_per_step samples; each rank packs its contiguous slice into the model's batch
// on the loader's thread (engine/batches/train_batches.h).
//
// Not its business: the model, what a step does with a batch (train_step.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "api/dataset_ref.h"
#include "api/job_spec.h"
#include "common/status.h"
#include "engine/data/dataset_stream.h"
#include "engine/data/loader.h"
#include "engine/batches/dataset_source.h"
#include "engine/dist/communicator.h"
#include "engine/format/checkpoint.h"
#include "engine/model/policy_transformer.h"
#include "engine/sim/demo_source.h"
#include "engine/batches/train_batches.h"

namespace engine {

class TrainData {
 public:
  // Collective when `dataset` is a directory: every rank opens it, and a rank that cannot fails
  // the run on every rank (that rank with the error naming the file, the others
  // failed_precondition). Errors also: a built-in task the model's shape cannot express.
  static common::Result<std::unique_ptr<TrainData>> Open(const api::EngineOptions& e,
                                                         const api::DatasetRef& dataset,
                                                         const PolicyConfig& model,
                                                         Communicator& comm);
  TrainData(const TrainData&) = delete;
  TrainData& operator=(const TrainData&) = delete;

  // The built-in task (also the held-out evaluation's, on the built-in stream).
  const DemoSource& task() const { return *task_; }
  // The dataset; null on the built-in stream.
  const DatasetSource* source() const { return source_.get(); }
  // Samples per epoch and shard fingerprint of the dataset; 0 on the built-in stream.
  uint64_t dataset_samples() const;
  uint64_t dataset_fingerprint() const;
  // The data position before global sample next_sample (as a checkpoint stores it).
  DataPosition PositionAt(uint64_t next_sample) const;
  // The loader's plan for `rank` of `world` (PlanConfigFor).
  data::PlanConfig PlanFor(int rank, int world) const;
  // The longest sample the plan can hold, in tokens, for reserving padded rows.
  int MaxSampleTokens(const data::PlanConfig& plan) const;
  // Rank 0's log line about the dataset; nothing on the built-in stream.
  void LogDataset() const;

  // Starts the loader of steps [first_step, last_step) from global sample next_sample, with
  // `prefetch` batches kept ready and, on a dataset, `read_threads` threads reading ahead.
  // Called once.
  data::Loader<TrainBatch>& StartLoader(const data::PlanConfig& plan, int64_t first_step,
                                        int64_t last_step, uint64_t next_sample, int prefetch,
                                        int read_threads);

 private:
  TrainData(const api::EngineOptions& e, const PolicyConfig& model, std::string path)
      : engine_(e), model_(model), path_(std::move(path)) {}

  api::EngineOptions engine_;
  PolicyConfig model_;
  std::string path_;  // the dataset directory; empty on the built-in stream
  std::unique_ptr<DemoSource> task_;
  std::unique_ptr<DatasetSource> source_;
  std::shared_ptr<const data::DatasetStream> stream_;
  std::unique_ptr<DatasetSampleReader> reader_;
  std::unique_ptr<data::Loader<TrainBatch>> loader_;
};

}  // namespace engine
