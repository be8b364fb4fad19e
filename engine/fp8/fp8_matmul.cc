#include "engine/fp8/fp8_matmul.h"

#include <cstdint>
#include <string>
#include <vector>

namespace engine::fp8 {
namespace {

common::Status CheckMatrix(const Fp8Matrix& m, const char* name) {
  if (m.rows < 1 || m.cols < 1 || m.block_rows < 1) {
    return common::InvalidArgument(std::string("fp8 matmul: ") + name + " is empty");
  }
  if (m.codes.size() != static_cast<size_t>(m.rows) * m.cols ||
      m.scales.size() != static_cast<size_t>(m.RowBlocks()) * m.ColBlocks()) {
    return common::InvalidArgument(std::string("fp8 matmul: ") + name +
                                   " codes or scales do not match its shape");
  }
  return common::Status::Ok();
}

void AddBias(float* y, const float* bias, long M, long N) {
  if (bias == nullptr) return;
  for (long m = 0; m < M; ++m) {
    float* row = y + m * N;
    for (long n = 0; n < N; ++n) row[n] += bias[n];
  }
}

}  // namespace

bool Bf16DotRuns(Format format, cpu::CpuPath path) {
  return (format == Format::kE4M3 || format == Format::kE5M2) && path == cpu::CpuPath::kAvx512 &&
         cpu::Avx512Bf16Enabled() && Avx512Bf16MatmulW8() != nullptr;
}

common::Status MatmulWeightFp8(float* y, const float* x, int M, const Fp8Matrix& w,
                               const float* bias, cpu::CpuPath path, WeightOnlyKernel kernel) {
  EMBODY_RETURN_IF_ERROR(CheckMatrix(w, "w"));
  if (M < 1) return common::InvalidArgument("fp8 matmul: M must be >= 1");
  const bool bf16_runs = Bf16DotRuns(w.format, path);
  if (kernel == WeightOnlyKernel::kBf16Dot && !bf16_runs) {
    return common::FailedPrecondition(
        std::string("fp8 matmul: the bf16 weight-only product needs the avx512 path on a CPU "
                    "with AVX512_BF16 (path ") +
        cpu::CpuPathName(path) + ")");
  }
  const KernelTable& k = KernelsFor(path);
  bool done = false;
  if (kernel != WeightOnlyKernel::kFp32 && bf16_runs) {
    // Reused across calls on a thread: inference calls this with the same few shapes.
    thread_local std::vector<uint16_t> scratch;
    const size_t need = static_cast<size_t>(W8Bf16ScratchWords(w.cols));
    if (scratch.size() < need) scratch.resize(need);
    // False when w holds NaN codes (or E5M2 infinities): the fp32-activation product below
    // keeps them exact.
    done = Avx512Bf16MatmulW8()(x, M, w.View(), scratch.data(), y);
  }
  if (!done) {
    // One pass over the codes (64 bytes a step) spares the per-element NaN blend in the kernel.
    const bool w_has_nan = k.has_nan(w.format, w.codes.data(), static_cast<long>(w.codes.size()));
    k.matmul_w8(x, M, w.View(), w_has_nan, y);
  }
  AddBias(y, bias, M, w.rows);
  return common::Status::Ok();
}

common::Status MatmulFp8(float* y, const Fp8Matrix& x, const Fp8Matrix& w, const float* bias,
                         cpu::CpuPath path) {
  EMBODY_RETURN_IF_ERROR(CheckMatrix(x, "x"));
  EMBODY_RETURN_IF_ERROR(CheckMatrix(w, "w"));
  if (x.cols != w.cols) {
    return common::InvalidArgument("fp8 matmul: x has " + std::to_string(x.cols) +
                                   " columns, w has " + std::to_string(w.cols));
  }
  const KernelTable& k = KernelsFor(path);
  // Reused across calls on a thread: the training step calls this with the same shapes.
  thread_local std::vector<float> scratch;
  const size_t need = static_cast<size_t>(X8W8ScratchFloats(x.rows));
  if (scratch.size() < need) scratch.resize(need);
  k.matmul_x8w8(x.View(), w.View(), scratch.data(), y);
  AddBias(y, bias, x.rows, w.rows);
  return common::Status::Ok();
}

}  // namespace engine::fp8
