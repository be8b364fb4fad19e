#include "engine/train/train_data.h"

#include <utility>

#include "common/log.h"
#include "engine/dist/agree_on_failure.h"

namespace engine {

common::Result<std::unique_ptr<TrainData>> TrainData::Open(const api::EngineOptions& e,
                                                           const api::DatasetRef& dataset,
                                                           const PolicyConfig& model,
                                                           Communicator& comm) {
  std::unique_ptr<TrainData> d(new TrainData(e, model, dataset.is_directory() ? dataset.path : ""));
  EMBODY_ASSIGN_OR_RETURN(task,
                          MakeDemoSource(e.data.dataset, e.model.action_dim,
                                         e.model.action_horizon, e.seed, model.vocab,
                                         e.data.demo_noise));
  d->task_ = std::move(task);
  if (dataset.is_directory()) {
    // It must be readable where every rank runs; every rank computes the same token counts from
    // its indexes.
    auto opened = DatasetSource::Open(dataset.path, e.data, model, e.data.tokens_per_row);
    EMBODY_RETURN_IF_ERROR(
        AgreeOnFailure(opened.status(), comm, "to open dataset " + dataset.path));
    d->source_ = std::move(opened).value();
    d->stream_ = std::make_shared<const data::DatasetStream>(e.seed, d->source_->sample_tokens());
  }
  return d;
}

uint64_t TrainData::dataset_samples() const {
  return source_ != nullptr ? source_->dataset().samples() : 0;
}

uint64_t TrainData::dataset_fingerprint() const {
  return source_ != nullptr ? source_->fingerprint() : 0;
}

DataPosition TrainData::PositionAt(uint64_t next_sample) const {
  DataPosition p;
  p.seed = engine_.seed;
  p.next_sample = next_sample;
  if (stream_ != nullptr) {
    p.epoch = stream_->Epoch(next_sample);
    p.in_epoch = stream_->InEpoch(next_sample);
    p.dataset_samples = stream_->samples();
    p.dataset_fingerprint = source_->fingerprint();
  }
  return p;
}

data::PlanConfig TrainData::PlanFor(int rank, int world) const {
  return PlanConfigFor(engine_, rank, world, stream_);
}

int TrainData::MaxSampleTokens(const data::PlanConfig& plan) const {
  return stream_ != nullptr ? stream_->MaxTokens()
                            : plan.lengths.MaxTokens() + engine_.model.action_horizon;
}

void TrainData::LogDataset() const {
  if (source_ == nullptr) return;
  std::string cams, props;
  for (const auto& k : source_->camera_keys()) cams += (cams.empty() ? "" : ",") + k;
  for (const auto& k : source_->proprio_keys()) props += (props.empty() ? "" : ",") + k;
  common::LogInfo("dataset",
                  {{"path", path_},
                   {"episodes", std::to_string(source_->dataset().episodes())},
                   {"samples", std::to_string(stream_->samples())},
                   {"mean_sample_tokens", std::to_string(stream_->MeanTokens())},
                   {"cameras", cams},
                   {"proprio", props},
                   {"state_tokens", std::to_string(source_->state_tokens())},
                   {"index_counts_checked", source_->index_counts_checked() ? "true" : "false"}});
}

data::Loader<TrainBatch>& TrainData::StartLoader(const data::PlanConfig& plan, int64_t first_step,
                                                 int64_t last_step, uint64_t next_sample,
                                                 int prefetch, int read_threads) {
  data::Loader<TrainBatch>::Options lo;
  lo.plan = plan;
  lo.first_step = first_step;
  lo.first_sample = next_sample;
  lo.num_steps = last_step - first_step;
  lo.prefetch = prefetch;
  if (source_ != nullptr) {
    const int samples_per_rank = static_cast<int>(plan.samples_per_step / plan.world);
    reader_ = std::make_unique<DatasetSampleReader>(
        *source_, lo.plan, next_sample, lo.num_steps,
        storage::ReadAheadOptions{read_threads, static_cast<size_t>(2 * samples_per_rank + 1)});
  }
  // The loader's thread fills batches: from the heap objects, which stay where they are.
  const DemoSource* task = task_.get();
  DatasetSampleReader* reader = reader_.get();
  const PolicyConfig model = model_;
  const bool packing = engine_.data.packing;
  auto fill = [task, reader, model, packing](const data::PackedPlan& p,
                                             TrainBatch* b) -> common::Status {
    if (reader != nullptr) return FillDatasetBatch(*reader, model, packing, p, b);
    return FillTrainBatch(*task, model, packing, p, b);
  };
  loader_ = std::make_unique<data::Loader<TrainBatch>>(lo, fill);
  return *loader_;
}

}  // namespace engine
