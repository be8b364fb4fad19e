// Background data loader: turns the global sample stream into per-step packed plans, materialises
// each plan into the model's batch in a background thread, and keeps up to `prefetch` batches
// ready in a bounded queue so the training step does not wait for data.
//
// The data stream is one infinite sequence of samples numbered by a global index; sample i is a
// pure function of (seed, i): its per-sample seed SampleSeed(seed, i), its token composition
// (drawn from the embodied length distribution with that seed) and whatever content the fill
// function derives from it (e.g. ReachTask::SampleAt(i)). A step consumes the next
// samples_per_step samples of the stream, all ranks together; rank r of W takes the contiguous
// slice [first + ⌊r·S/W⌋, first + ⌊(r+1)·S/W⌋) of them and packs it (best-fit decreasing) into
// rows of tokens_per_row. The data position is thus one number, the global index of the next
// sample, and a checkpoint taken on W ranks resumes on W' ranks from the same position: the
// stream goes on unchanged and only its split over ranks differs. Ranks hold different numbers
// of real tokens per step; the gradient all-reduce weights by them (engine/dist/grad_buckets.h).
//
// With PlanConfig::dataset set, the stream is a finite dataset's epochs instead
// (dataset_stream.h): global index g is dataset sample dataset->SampleAt(g), whose length comes
// from the dataset's token counts (no data read); the slicing, packing and position are the same.
//
// PackedPlan is model-agnostic (ids, seeds, compositions, cu_seqlens). The model's batch struct
// is built from it by a user-supplied fill function that runs in the loader thread; the loader is
// a template over that batch type so it can be written before the model and reused by any.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/time_util.h"
#include "engine/data/dataset_stream.h"
#include "engine/data/embodied_lengths.h"
#include "engine/data/packing.h"

namespace engine::data {

struct PlanConfig {
  uint64_t seed = 0;
  int64_t samples_per_step = 64;  // global, over all ranks; ≥ world
  int rank = 0;
  int world = 1;
  int tokens_per_row = 512;  // ≥ lengths.MaxTokens() + action_tokens
  // Tokens every sample carries besides its composition (the policy's action chunk: one token per
  // action, action_horizon of them), counted in its packed length.
  int action_tokens = 0;
  EmbodiedLengthConfig lengths;
  // A finite dataset instead of the built-in stream; its lengths include the action tokens
  // (action_tokens and lengths are then unused).
  std::shared_ptr<const DatasetStream> dataset;
};

// One rank's share of one step, before materialisation.
struct PackedPlan {
  int64_t step = 0;           // 0-based optimizer step this plan feeds
  uint64_t global_begin = 0;  // the step's samples, all ranks: [global_begin, global_end)
  uint64_t global_end = 0;    // = data position after this step
  uint64_t local_begin = 0;   // this rank's slice: [local_begin, local_end)
  uint64_t local_end = 0;
  // Per local sample i (global index local_begin + i):
  std::vector<uint64_t> sample_seeds;  // SampleSeed(seed, local_begin + i)
  // Built-in stream: the drawn composition. Dataset: the dataset sample number (compositions
  // stay empty).
  std::vector<SampleComposition> compositions;
  std::vector<uint64_t> dataset_samples;
  std::vector<int32_t> lengths;  // compositions[i].NumTokens() + action_tokens
  // Rows of tokens_per_row; rows.sample_index holds local sample positions i.
  PackedRows rows;

  int num_samples() const { return static_cast<int>(lengths.size()); }
  uint64_t SampleId(int i) const { return local_begin + static_cast<uint64_t>(i); }
  int64_t real_tokens() const { return rows.real_tokens; }
};

// The seed of global sample `index` in the stream `seed`.
uint64_t SampleSeed(uint64_t seed, uint64_t index);
// Rank `rank`'s slice [begin, end) of the `count` samples starting at `first`.
void RankSlice(uint64_t first, int64_t count, int rank, int world, uint64_t* begin, uint64_t* end);
// Checks a PlanConfig (InvalidArgument naming the field).
common::Status ValidatePlanConfig(const PlanConfig& config);
// The plan of `step`, whose samples start at global index `first_sample`. Pure function.
common::Result<PackedPlan> MakePlan(const PlanConfig& config, int64_t step, uint64_t first_sample);

// Loader<Batch>: one producer thread computing plans for steps first_step, first_step+1, ...
// (step k starts at first_sample + (k - first_step)·samples_per_step), filling a Batch for each,
// and a bounded queue of at most `prefetch` filled batches. Next() blocks only while the queue is
// empty and counts that time as data wait. Destruction stops the thread and joins it; a fill in
// progress finishes first. A fill error is delivered by the Next() that would have returned its
// batch, and the producer stops.
template <typename Batch>
class Loader {
 public:
  using Fill = std::function<common::Status(const PackedPlan&, Batch*)>;
  struct Item {
    PackedPlan plan;
    std::unique_ptr<Batch> batch;
  };
  struct Options {
    PlanConfig plan;
    int64_t first_step = 0;
    uint64_t first_sample = 0;
    int64_t num_steps = -1;  // steps to produce; -1: until destroyed
    int prefetch = 2;        // ≥ 1
  };

  Loader(Options options, Fill fill) : options_(std::move(options)), fill_(std::move(fill)) {
    if (options_.prefetch < 1) options_.prefetch = 1;
    thread_ = std::thread([this] { Produce(); });
  }
  ~Loader() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    thread_.join();
  }
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next step's plan and batch, in step order. FailedPrecondition after num_steps items.
  common::Result<Item> Next() {
    const double t0 = common::MonotonicSeconds();
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [this] { return !queue_.empty() || finished_; });
    data_wait_seconds_ += common::MonotonicSeconds() - t0;
    if (queue_.empty()) {
      if (!error_.ok()) return error_;
      return common::FailedPrecondition("loader: no more steps");
    }
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    space_.notify_one();
    return item;
  }
  // Gives a consumed batch back for reuse, so batch buffers are refilled rather than reallocated
  // (the small per-step plan is still built afresh).
  void Recycle(std::unique_ptr<Batch> batch) {
    if (batch == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(batch));
  }

  // Total time Next() spent waiting for the producer.
  double data_wait_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return data_wait_seconds_;
  }
  // Batches filled so far (including those still queued).
  int64_t produced() const {
    std::lock_guard<std::mutex> lock(mu_);
    return produced_;
  }
  size_t queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  void Produce() {
    for (int64_t k = 0; options_.num_steps < 0 || k < options_.num_steps; ++k) {
      std::unique_ptr<Batch> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        space_.wait(lock, [this] {
          return stop_ || queue_.size() < static_cast<size_t>(options_.prefetch);
        });
        if (stop_) break;
        if (!free_.empty()) {
          batch = std::move(free_.back());
          free_.pop_back();
        }
      }
      if (batch == nullptr) batch = std::make_unique<Batch>();
      const int64_t step = options_.first_step + k;
      const uint64_t first =
          options_.first_sample +
          static_cast<uint64_t>(k) * static_cast<uint64_t>(options_.plan.samples_per_step);
      common::Status status;
      auto plan = MakePlan(options_.plan, step, first);
      if (!plan.ok()) {
        status = plan.status();
      } else {
        status = fill_(*plan, batch.get());
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (!status.ok()) {
        error_ = status;
        break;
      }
      queue_.push_back(Item{std::move(plan).value(), std::move(batch)});
      ++produced_;
      ready_.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    ready_.notify_all();
  }

  Options options_;
  Fill fill_;
  mutable std::mutex mu_;
  std::condition_variable ready_;  // queue non-empty or finished
  std::condition_variable space_;  // queue below prefetch or stop
  std::deque<Item> queue_;
  std::vector<std::unique_ptr<Batch>> free_;
  bool stop_ = false;
  bool finished_ = false;
  common::Status error_;
  int64_t produced_ = 0;
  double data_wait_seconds_ = 0.0;
  std::thread thread_;  // last: started after every other member exists
};

}  // namespace engine::data
