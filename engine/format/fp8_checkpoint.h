// FP8 checkpoints: a trained policy after post-training quantisation (engine/model/policy_quant.h),
// for evaluation and rollout; written by `embody-engine quantize` and by a job with
// engine.fp8.inference. Only the weights: no optimizer state, no data position (a quantised
// policy is not trained further).
//
// File layout, little-endian (format version 1):
//   char[8]  magic "EMBDFP8W"
//   u32      version        1
//   u32      config_bytes
//   u64      step           training steps behind the weights
//   u32      tensor_count   every tensor of the model's layout, in layout order
//   u32      reserved       0
//   char[]   config         JSON: the source checkpoint's config ("engine", "model") plus "fp8":
//                           format, block, the quantised names and their Fp8Stats
//   tensor_count × {
//     u32 name_bytes, char[] name
//     u8  kind              0 fp32, 1 fp8
//     u8  format            fp8 only: 0 E4M3, 1 E5M2 (0 for fp32)
//     u16 slices            fp8 only: equal row slices with blocks of their own (3 for qkv)
//     u32 rows, u32 cols    the tensor's shape as (rows, cols); a vector is (1, n)
//     fp32: f32[rows·cols]
//     fp8:  per slice: u8[rows/slices · cols] codes, f32[⌈rows/slices/128⌉·⌈cols/128⌉] scales
//   }
//   u64      FNV-1a 64 of every byte before it
// Decoding treats the file as hostile: every count is bounded by what is left of the file, names
// by 256 bytes, scales must be finite and positive, and the checksum must match.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/fp8/block_quant.h"

namespace engine {

inline constexpr uint32_t kFp8CheckpointVersion = 1;

struct Fp8CheckpointTensor {
  std::string name;
  int rows = 0;
  int cols = 0;
  std::vector<float> values;          // fp32 tensors: rows · cols values
  std::vector<fp8::Fp8Matrix> fp8;    // fp8 tensors: the row slices (empty for fp32)
  bool is_fp8() const { return !fp8.empty(); }
};

struct Fp8CheckpointData {
  int64_t step = 0;
  nlohmann::json config;
  std::vector<Fp8CheckpointTensor> tensors;
};

std::string EncodeFp8Checkpoint(const Fp8CheckpointData& data);
common::Result<Fp8CheckpointData> DecodeFp8Checkpoint(const std::string& bytes);

// Writes atomically (temp file, fsync, rename); returns the file size in bytes.
common::Result<int64_t> SaveFp8Checkpoint(const std::string& path, const Fp8CheckpointData& data);
common::Result<Fp8CheckpointData> LoadFp8Checkpoint(const std::string& path);

}  // namespace engine
