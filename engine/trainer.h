// Trainer: the engine's training loop for kind "train" jobs.
//
// Each step every rank draws its own batch from the built-in task (different samples per rank),
// runs forward and backward, averages gradients over ranks with one all-reduce of the flat
// gradient buffer, and applies the same AdamW update; parameters start identical (same seed) and so
// stay bitwise identical on every rank. Rank 0 alone reports step events, prints progress and
// writes checkpoints.
//
// Runs with any Communicator, so tests train in one process with LocalCommunicator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/report/event_sink.h"

namespace engine {

struct TrainerOptions {
  api::EngineOptions engine;
  // Where rank 0 writes step-<N>.ckpt files; empty: no checkpoints.
  std::string checkpoint_dir;
  // Rank 0 prints a progress line to stdout every log_every steps and at the last step;
  // 0 picks max(1, steps / 20).
  int log_every = 0;
  bool print_progress = true;
};

struct TrainResult {
  std::vector<float> losses;  // mean loss over ranks, one per step (every rank has them)
  std::vector<float> params;  // final parameters
  double mean_step_seconds = 0.0;
  double tokens_per_s = 0.0;    // global, over the whole run
  double samples_per_s = 0.0;   // global, over the whole run
  std::string last_checkpoint;  // absolute path on rank 0; empty elsewhere or without checkpoints
};

// Trains for engine.optim.steps steps. `events` receives rank 0's step and checkpoint events and
// may be null (also on other ranks, where it is ignored). Errors: bad options (invalid_argument),
// checkpoint I/O (internal, rank 0 only: the caller must abort the other ranks, e.g. MPI_Abort),
// a non-finite loss (internal, on every rank).
common::Result<TrainResult> Train(const TrainerOptions& options, Communicator& comm,
                                  EventSink* events);

}  // namespace engine
