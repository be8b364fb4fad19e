// Engine checkpoints: everything needed to continue a run exactly, in one self-describing file:
// model parameters, AdamW state (m, v, t), the training step, the data position and named RNG
// states.
//
// File layout, little-endian (format version 4):
//   char[8]  magic "EMBDCKPT"
//   u32      version         3
//   u32      config_bytes
//   u64      step            optimizer steps completed
//   u64      adam_t          AdamW step count
//   u64      param_count     n
//   u64      data_seed       seed of the sample stream
//   u64      data_next       global index of the first sample not yet consumed
//   u64      data_epoch      passes completed over a finite dataset (0 for the built-in stream)
//   u32      rng_count
//   u32      residual_ranks  R: ranks whose fp8 all-reduce residuals follow (v4; 0 before, and
//                            without engine.fp8.allreduce)
//   u64      data_in_epoch   samples of the current epoch consumed (v3; 0 for the built-in stream)
//   u64      dataset_samples samples per epoch of the dataset trained on (v3; 0: built-in stream)
//   u64      dataset_fingerprint  identity of that dataset's shards (v3; 0: built-in stream)
//   char[]   config          JSON (config_bytes): engine options, model shape, world size
//   rng_count × { u32 name_bytes, char[] name, u64 state }
//   f32[n]   params
//   f32[n]   adam m
//   f32[n]   adam v
//   f32[R·n] fp8 all-reduce residuals, rank 0's n first (v4, R > 0)
//   u64      FNV-1a 64 of every byte before it
// Version 1 files (no data position, no RNG states) still decode, with has_data_position false;
// the trainer refuses to resume from them, since their data stream was keyed by rank. Version 2
// files (written before the engine trained on datasets) decode with the v3 fields 0: the
// built-in stream. Version 3 files decode with no residuals.
//
// The residuals are each rank's quantisation error not yet sent (engine/dist/fp8_allreduce.h):
// part of the gradient the next steps still owe. Resumed on the same number of ranks, each rank
// takes its own and the run continues bit for bit; on another number, their sum goes to rank 0
// (the owed total is kept, its split over ranks is not).
//
// The data position is rank-count independent (engine/data/loader.h): samples are a function of
// (seed, global index), so a checkpoint written by W ranks resumes on any W'. On a dataset the
// global index runs through the epochs' shuffled orders (engine/data/dataset_stream.h):
// next_sample = data_epoch · dataset_samples + data_in_epoch; the fingerprint ties the position to
// the dataset it counts in. The built-in trainer
// draws nothing outside that stream, so its rng map is empty; a component with a generator that
// carries state across steps (SplitMix64: one u64 word) records it under its own name.
//
// Files are written whole with common::WriteFileAtomic (temp file, fsync, rename), so a reader
// sees either the old directory contents or the complete new file. This is the engine's own
// format until storage/ owns checkpoints (DESIGN §6).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace engine {

inline constexpr uint32_t kCheckpointVersion = 4;

struct DataPosition {
  uint64_t seed = 0;
  uint64_t next_sample = 0;  // global index into the stream, over all ranks and epochs
  uint64_t epoch = 0;
  uint64_t in_epoch = 0;
  uint64_t dataset_samples = 0;      // 0: the built-in stream
  uint64_t dataset_fingerprint = 0;  // 0: the built-in stream
};

struct CheckpointData {
  int64_t step = 0;
  int64_t adam_t = 0;
  nlohmann::json config;
  std::vector<float> params;
  std::vector<float> adam_m;  // same size as params
  std::vector<float> adam_v;
  DataPosition data;
  bool has_data_position = true;  // false only for version 1 files
  std::map<std::string, uint64_t> rng;
  // engine.fp8.allreduce: every rank's residual, rank-major (grad_residual_ranks × params.size());
  // empty otherwise.
  uint32_t grad_residual_ranks = 0;
  std::vector<float> grad_residuals;
};

std::string EncodeCheckpoint(const CheckpointData& data);
common::Result<CheckpointData> DecodeCheckpoint(const std::string& bytes);

// Writes `data` atomically to path; returns the file size in bytes.
common::Result<int64_t> SaveCheckpoint(const std::string& path, const CheckpointData& data);
// Reads and validates (magic, version, sizes, checksum) a checkpoint file.
common::Result<CheckpointData> LoadCheckpoint(const std::string& path);

// "<dir>/step-<step>.ckpt"
std::string CheckpointPath(const std::string& dir, int64_t step);
// Steps of the step-<N>.ckpt files in dir, ascending. Other files are ignored.
common::Result<std::vector<int64_t>> ListCheckpointSteps(const std::string& dir);
// Deletes all but the newest `keep` step-<N>.ckpt files in dir.
common::Status PruneCheckpoints(const std::string& dir, int keep);
// The checkpoint to resume from when asked for `path`: the newest checkpoint in path's directory
// whose step is at least path's. The control plane learns of checkpoints a heartbeat late, so by
// the time a lost job restarts the run may have written newer ones and pruned the one it named.
// Returns `path` itself when the directory holds nothing newer (or cannot be listed).
std::string NewestCheckpointFrom(const std::string& path);

}  // namespace engine
