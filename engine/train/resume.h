// Resume: continuing a training run from a checkpoint (TrainerOptions::resume_from).
//
// Rank 0 reads the file and broadcasts its bytes (other nodes may not see rank 0's disk); every
// rank decodes the same bytes and checks them against the job, so every rank returns the same
// result, errors included, and none is left waiting in a collective. A checkpoint is refused
// unless it continues exactly this job: a data position (not a version 1 file), the same model
// shape and parameter count, the same data seed, the same dataset (sample count and shard
// fingerprint; or the built-in stream on both sides), and a step not past the job's steps. The
// rank count may differ: the data position is global (engine/data/loader.h) and the fp8
// residuals are split as ResidualForRank says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/format/checkpoint.h"
#include "engine/train/train_state.h"

namespace engine {

// What the job would write in a checkpoint of its own, to hold the one it resumes from against.
struct ResumeExpectation {
  nlohmann::json model;  // ModelJson (engine/format/checkpoint_model.h) of the job's model
  size_t params = 0;
  uint64_t seed = 0;  // engine.seed
  int steps = 0;      // engine.optim.steps
  // The dataset trained on; both 0 for the built-in stream.
  uint64_t dataset_samples = 0;
  uint64_t dataset_fingerprint = 0;
};

// Where a resumed run continues; zeros for a fresh start.
struct ResumePoint {
  int64_t step = 0;          // optimizer steps already done
  uint64_t next_sample = 0;  // global index of the next sample of the stream
};

// Ok when `ck` (read from `path`) continues the job `want` describes; invalid_argument naming
// what differs otherwise.
common::Status CheckResumable(const CheckpointData& ck, const ResumeExpectation& want,
                              const std::string& path);

// Collective. Reads `path` (with newest, NewestCheckpointFrom(path) instead) on rank 0 and
// broadcasts it; not_found when rank 0 cannot read it, invalid_argument when it does not decode.
common::Result<CheckpointData> ReadCheckpointOnAllRanks(const std::string& path, bool newest,
                                                        Communicator& comm);

// Collective. Reads and checks the checkpoint as above, then restores *state: parameters, AdamW
// and this rank's fp8 residual. On error *state is untouched.
common::Result<ResumePoint> Resume(const std::string& path, bool newest,
                                   const ResumeExpectation& want, Communicator& comm,
                                   TrainState* state);

}  // namespace engine
