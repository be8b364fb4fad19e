#include "engine/fp8/block_quant.h"

#include <algorithm>
#include <cfloat>
#include <string>

#include "engine/fp8/fp8_format.h"

namespace engine::fp8 {

void Fp8Stats::Merge(const Fp8Stats& other) {
  if (other.elements == 0) return;
  if (elements == 0) {
    *this = other;
    return;
  }
  elements += other.elements;
  amax = std::max(amax, other.amax);
  scale_min = std::min(scale_min, other.scale_min);
  scale_max = std::max(scale_max, other.scale_max);
  saturated += other.saturated;
  underflowed += other.underflowed;
  nan += other.nan;
}

float BlockScale(Format format, float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  return std::max(amax / MaxFinite(format), FLT_MIN);
}

common::Result<Fp8Stats> QuantizeBlocks(const float* x, int rows, int cols, int block_rows,
                                        Format format, Fp8Matrix* out, cpu::CpuPath path) {
  if (rows < 1 || cols < 1) {
    return common::InvalidArgument("fp8 quantise: empty matrix " + std::to_string(rows) + "x" +
                                   std::to_string(cols));
  }
  if (block_rows < 1) return common::InvalidArgument("fp8 quantise: block_rows must be >= 1");
  if (static_cast<int64_t>(rows) * cols > INT32_MAX) {
    return common::InvalidArgument("fp8 quantise: matrix larger than 2^31 elements");
  }
  const KernelTable& k = KernelsFor(path);
  out->format = format;
  out->rows = rows;
  out->cols = cols;
  out->block_rows = block_rows;
  out->codes.resize(static_cast<size_t>(rows) * cols);
  out->scales.resize(static_cast<size_t>(out->RowBlocks()) * out->ColBlocks());

  Fp8Stats stats;
  stats.elements = static_cast<int64_t>(rows) * cols;
  stats.scale_min = FLT_MAX;
  EncodeCounts counts;
  const int col_blocks = out->ColBlocks();
  for (int rb = 0; rb < out->RowBlocks(); ++rb) {
    const int r0 = rb * block_rows, r1 = std::min(rows, r0 + block_rows);
    for (int cb = 0; cb < col_blocks; ++cb) {
      const int c0 = cb * kBlock, n = std::min(cols - c0, kBlock);
      float amax = 0.0f;
      for (int r = r0; r < r1; ++r) {
        amax = std::max(amax, k.finite_amax(x + static_cast<size_t>(r) * cols + c0, n));
      }
      const float scale = BlockScale(format, amax);
      out->scales[static_cast<size_t>(rb) * col_blocks + cb] = scale;
      stats.amax = std::max(stats.amax, amax);
      stats.scale_min = std::min(stats.scale_min, scale);
      stats.scale_max = std::max(stats.scale_max, scale);
      const float inv = 1.0f / scale;
      for (int r = r0; r < r1; ++r) {
        const size_t at = static_cast<size_t>(r) * cols + c0;
        k.encode(format, x + at, n, inv, out->codes.data() + at, &counts);
      }
    }
  }
  stats.saturated = counts.saturated;
  stats.underflowed = counts.underflowed;
  stats.nan = counts.nan;
  return stats;
}

void Dequantize(const Fp8Matrix& m, float* out, cpu::CpuPath path) {
  const KernelTable& k = KernelsFor(path);
  const int col_blocks = m.ColBlocks();
  for (int r = 0; r < m.rows; ++r) {
    for (int cb = 0; cb < col_blocks; ++cb) {
      const int c0 = cb * kBlock, n = std::min(m.cols - c0, kBlock);
      const size_t at = static_cast<size_t>(r) * m.cols + c0;
      k.decode(m.format, m.codes.data() + at, n, m.Scale(r, c0), out + at);
    }
  }
}

}  // namespace engine::fp8
