// Checkpointer: when and how a training run writes its checkpoints (engine.checkpoint and
// TrainerOptions::checkpoint_dir).
//
// A run writes step-<N>.ckpt (engine/format/checkpoint.h) every engine.checkpoint.every_steps
// steps, at its last step, and at the step it stops early in; after each it keeps only the newest
// engine.checkpoint.keep files of the directory. Only rank 0 writes, with common::WriteFileAtomic
// (a reader sees the old directory or the whole new file, never a partial one); every rank takes
// part in each save, since the fp8 residuals are gathered to rank 0 and all ranks learn whether
// rank 0 could write. Each checkpoint written is logged and reported to the run's event sink as
// {"type":"checkpoint","step","path","bytes"}, the path absolute.
//
// Not its business: what to resume from (resume.h), the server's copy in its blob store.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/format/checkpoint.h"
#include "engine/report/event_sink.h"
#include "engine/train/train_state.h"

namespace engine {

class Checkpointer {
 public:
  // dir empty: the run writes no checkpoints (Due is always false). Rank 0 creates dir and
  // returns the error when it cannot; the other ranks do not touch the file system. config: the
  // checkpoint's config (engine options, model shape, world size). events: rank 0's sink, may be
  // null; ignored on other ranks.
  static common::Result<Checkpointer> Create(const std::string& dir,
                                             const api::CheckpointOptions& options,
                                             nlohmann::json config, Communicator& comm,
                                             EventSink* events);

  // Whether step `done` (1-based) of a run of `steps` is saved: periodic, last, or stopping early.
  bool Due(int done, int steps, bool stopping) const;

  // Collective: every rank calls it for the same step. Rank 0 writes step `done` of `state` at
  // data position `data`, prunes, logs and reports it; every rank returns rank 0's error, the
  // others as failed_precondition.
  common::Status Save(int done, const TrainState& state, const DataPosition& data);

  // Absolute directory and newest file written, on rank 0; empty elsewhere.
  const std::string& dir() const { return dir_; }
  const std::string& last_path() const { return last_path_; }

 private:
  Checkpointer(bool enabled, std::string dir, const api::CheckpointOptions& options,
               nlohmann::json config, Communicator& comm, EventSink* events);
  // Rank 0: encodes, writes, prunes, reports.
  common::Status Write(int done, const TrainState& state, const DataPosition& data,
                       std::vector<float> residuals);

  bool enabled_;
  std::string dir_;
  int every_steps_;
  int keep_;
  nlohmann::json config_;
  Communicator* comm_;
  EventSink* events_;
  std::string last_path_;
};

}  // namespace engine
