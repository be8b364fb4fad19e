// Engine checkpoints: model parameters and AdamW state in one self-describing file.
//
// File layout, little-endian (format version 1):
//   char[8]  magic "EMBDCKPT"
//   u32      version
//   u32      config_bytes
//   u64      step            optimizer steps completed
//   u64      adam_t          AdamW step count
//   u64      param_count     n
//   char[]   config          JSON (config_bytes): engine options and model shape
//   f32[n]   params
//   f32[n]   adam m
//   f32[n]   adam v
//   u64      FNV-1a 64 of every byte before it
// Files are written whole with common::WriteFileAtomic, so a reader sees either the old directory
// contents or the complete new file. This is the engine's own format until storage/ owns
// checkpoints (DESIGN §6); it does not carry data position or RNG state because data is a pure
// function of (seed, rank, step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace engine {

inline constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointData {
  int64_t step = 0;
  int64_t adam_t = 0;
  nlohmann::json config;
  std::vector<float> params;
  std::vector<float> adam_m;  // same size as params
  std::vector<float> adam_v;
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

}  // namespace engine
