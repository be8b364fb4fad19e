// The fp8 compute kernels behind one small table of function pointers, one table per CPU path
// (kernels_scalar.cc, kernels_avx2.cc, kernels_avx512.cc), plus one bf16 weight-only product
// (kernels_avx512_bf16.cc); codec.h, block_quant.h and fp8_matmul.h pick the table once and
// call through it. Internal to engine/fp8.
//
// Everything here is plain data: the per-ISA files include only this header, fp8_constants.h
// and <immintrin.h>, so no inline function or template is ever instantiated with AVX flags and
// then shared with code that runs on a machine without them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/cpu/cpu_path.h"
#include "engine/fp8/fp8_constants.h"

namespace engine::fp8 {

// What an encode saw, over the elements it was given (added to, never reset):
//   saturated:   non-NaN values whose scaled magnitude lies past the half-ulp above the largest
//                finite value (464 for E4M3, 61440 for E5M2), ±inf included: values that
//                round-to-nearest would have carried beyond the format, so clamping changed them;
//   underflowed: non-zero inputs whose code is ±0;
//   nan:         NaN inputs.
struct EncodeCounts {
  int64_t saturated = 0;
  int64_t underflowed = 0;
  int64_t nan = 0;
};

// A row-major fp8 matrix (rows, cols) with one fp32 scale per block of block_rows × kBlock
// elements; scales are (ceil(rows / block_rows), ceil(cols / kBlock)), row-major. Element
// (r, c) stands for Decode(codes[r·cols + c]) · scales[(r / block_rows)·col_blocks + c / kBlock].
struct Fp8MatrixView {
  const uint8_t* codes;
  const float* scales;
  int rows;
  int cols;
  int block_rows;
  Format format;
};

// Floats of scratch MatmulX8W8 needs for an M-row X: one decoded X K-block (M rounded up to
// 4 rows) and one decoded, transposed 128 × 64 W panel.
inline constexpr long kW8PanelCols = 64;
constexpr long X8W8ScratchFloats(long M) {
  return ((M + 3) / 4 * 4) * kBlock + kBlock * kW8PanelCols;
}

struct KernelTable {
  cpu::CpuPath path;
  // out[i] = Encode(in[i] · inv_scale); counts (may be null) += what the encode saw.
  void (*encode)(Format format, const float* in, long n, float inv_scale, uint8_t* out,
                 EncodeCounts* counts);
  // out[i] = Decode(in[i]) · scale, rounded once; NaN codes give the canonical quiet NaN with
  // the code's sign, bits 0x7fc00000 | sign.
  void (*decode)(Format format, const uint8_t* in, long n, float scale, float* out);
  // The largest |in[i]| over finite elements; 0 if there are none.
  float (*finite_amax)(const float* in, long n);
  // Whether any of the n codes is a NaN code of `format`.
  bool (*has_nan)(Format format, const uint8_t* in, long n);
  // Weight-only: y (M, N) = x (M, K) · dequant(w) (N, K)ᵀ, K = w.cols, N = w.rows. w_has_nan
  // says whether w holds NaN codes (decoding them exactly costs the fast paths a blend).
  void (*matmul_w8)(const float* x, int M, const Fp8MatrixView& w, bool w_has_nan, float* y);
  // y (M, N) = dequant(x) (M, K) · dequant(w) (N, K)ᵀ with x.cols == w.cols, kBlock-column
  // blocks in both; scratch holds X8W8ScratchFloats(M) floats.
  void (*matmul_x8w8)(const Fp8MatrixView& x, const Fp8MatrixView& w, float* scratch, float* y);
};

// Weight-only E4M3 or E5M2 product on bf16 dot products (kernels_avx512_bf16.cc), for the
// avx512 path on CPUs with AVX512_BF16 (cpu::CpuSupportsAvx512Bf16): y (M, N) = x (M, K) ·
// dequant(w) (N, K)ᵀ with each x element times its K-block's scale rounded to bf16 and
// subnormal weights read as zero (fp8_matmul.h has the bound). NaN codes and E5M2's infinities
// are not decoded: the product returns false when it meets one (y is then unspecified) and
// true otherwise. scratch holds W8Bf16ScratchWords(w.cols) words.
using MatmulW8Bf16Fn = bool (*)(const float* x, int M, const Fp8MatrixView& w, uint16_t* scratch,
                                float* y);
constexpr long W8Bf16ScratchWords(long K) { return 5 * ((K + 63) / 64 * 64); }
MatmulW8Bf16Fn Avx512Bf16MatmulW8();

const KernelTable& ScalarKernels();
// Null when the build's compiler could not produce the path (non-x86 hosts).
const KernelTable* Avx2Kernels();
const KernelTable* Avx512Kernels();

// The table for `path`; aborts with a message if this CPU cannot run it (callers ask
// cpu::CpuSupports or use cpu::ActiveCpuPath first, so this cannot happen).
const KernelTable& KernelsFor(cpu::CpuPath path);

}  // namespace engine::fp8
