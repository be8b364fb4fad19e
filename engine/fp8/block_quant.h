// Fine-grained block scaling (DeepSeek-V3's recipe, the paper's FP8 PTQ): a float matrix becomes
// fp8 codes plus one fp32 scale per block, so one outlier costs precision only in its block.
//
//   weights      (rows, cols) = (out features, in features), 128 × 128 blocks
//   activations  (rows, cols) = (tokens, features), 1 × 128 tiles (one scale per row per block)
//
// scale = amax / max finite of the format (448 for E4M3, 57344 for E5M2), amax the largest
// finite |x| in the block; the stored value is x / scale, encoded (codec.h rules). Rules at the
// edges:
//   - amax 0 (all zeros, or nothing finite) → scale 1;
//   - scale below FLT_MIN (amax < ~5e-36 for E4M3) → FLT_MIN, so 1/scale stays finite;
//   - ±inf saturate to ±max·scale and NaN stays NaN; neither enters amax;
//   - ragged edges: a matrix whose sides are not multiples of 128 has smaller last blocks,
//     scaled by their own amax; nothing is padded in memory.
// Dequantised element = Decode(code) · scale of its block.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/cpu/cpu_path.h"
#include "engine/fp8/fp8_constants.h"
#include "engine/fp8/kernels.h"

namespace engine::fp8 {

// What quantising a tensor did, small enough to ride along in a step event.
struct Fp8Stats {
  int64_t elements = 0;
  float amax = 0.0f;       // largest finite |x| of the whole tensor
  float scale_min = 0.0f;  // smallest and largest block scale
  float scale_max = 0.0f;
  int64_t saturated = 0;    // clamped to ±max (see EncodeCounts)
  int64_t underflowed = 0;  // non-zero inputs that became ±0
  int64_t nan = 0;          // NaN inputs

  // Combines the statistics of two tensors (a layer's, a model's).
  void Merge(const Fp8Stats& other);
};

// A row-major fp8 matrix with block scales; block_rows is 128 (weights) or 1 (activations),
// blocks are always kBlock columns wide.
struct Fp8Matrix {
  Format format = Format::kE4M3;
  int rows = 0;
  int cols = 0;
  int block_rows = kBlock;
  std::vector<uint8_t> codes;  // (rows, cols)
  std::vector<float> scales;   // (RowBlocks(), ColBlocks())

  int RowBlocks() const { return (rows + block_rows - 1) / block_rows; }
  int ColBlocks() const { return (cols + kBlock - 1) / kBlock; }
  float Scale(int row, int col) const {
    return scales[static_cast<size_t>(row / block_rows) * ColBlocks() + col / kBlock];
  }
  Fp8MatrixView View() const {
    return {codes.data(), scales.data(), rows, cols, block_rows, format};
  }
  size_t Bytes() const { return codes.size() + scales.size() * sizeof(float); }
};

// The block scale for a block whose largest finite |x| is amax (rules above).
float BlockScale(Format format, float amax);

// Quantises x (rows, cols) in blocks of block_rows × kBlock into *out (resized). block_rows
// must be ≥ 1; rows and cols ≥ 1 and below 2^31 elements in all.
common::Result<Fp8Stats> QuantizeBlocks(const float* x, int rows, int cols, int block_rows,
                                        Format format, Fp8Matrix* out,
                                        cpu::CpuPath path = cpu::ActiveCpuPath());

// 128 × 128 blocks, for a Linear layer's weight (out features, in features).
inline common::Result<Fp8Stats> QuantizeWeights(const float* w, int rows, int cols, Format format,
                                                Fp8Matrix* out,
                                                cpu::CpuPath path = cpu::ActiveCpuPath()) {
  return QuantizeBlocks(w, rows, cols, kBlock, format, out, path);
}

// 1 × 128 tiles, for activations (tokens, features).
inline common::Result<Fp8Stats> QuantizeActivations(const float* x, int rows, int cols,
                                                    Format format, Fp8Matrix* out,
                                                    cpu::CpuPath path = cpu::ActiveCpuPath()) {
  return QuantizeBlocks(x, rows, cols, 1, format, out, path);
}

// out (rows, cols) = the dequantised matrix.
void Dequantize(const Fp8Matrix& m, float* out, cpu::CpuPath path = cpu::ActiveCpuPath());

}  // namespace engine::fp8
