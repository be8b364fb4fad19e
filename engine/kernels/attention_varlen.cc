#include "engine/kernels/attention_varlen.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/cpu/cpu_path.h"
#include "engine/kernels/attention_varlen_kernels.h"

namespace engine::kernels {

common::Status CheckVarlenShape(const VarlenShape& shape, std::span<const int32_t> cu_seqlens) {
  if (shape.H < 1 || shape.D < 1 || shape.T < 0) {
    return common::InvalidArgument(
        "attention needs H ≥ 1, D ≥ 1, T ≥ 0; got H=" + std::to_string(shape.H) +
        " D=" + std::to_string(shape.D) + " T=" + std::to_string(shape.T));
  }
  if (cu_seqlens.empty() || cu_seqlens.front() != 0 || cu_seqlens.back() != shape.T) {
    return common::InvalidArgument(
        "cu_seqlens must start at 0 and end at T=" + std::to_string(shape.T), "cu_seqlens");
  }
  for (size_t s = 1; s < cu_seqlens.size(); ++s) {
    if (cu_seqlens[s] < cu_seqlens[s - 1]) {
      return common::InvalidArgument("cu_seqlens decreases at " + std::to_string(s), "cu_seqlens");
    }
  }
  return common::Status::Ok();
}

namespace {

const VarlenKernels& Active() {
  static const VarlenKernels& table = []() -> const VarlenKernels& {
    switch (cpu::ActiveCpuPath()) {
      case cpu::CpuPath::kAvx512:
        return Avx512VarlenKernels();
      case cpu::CpuPath::kAvx2:
        return Avx2VarlenKernels();
      case cpu::CpuPath::kScalar:
        break;
    }
    return Sse2VarlenKernels();
  }();
  return table;
}

}  // namespace

const char* AttentionKernelsName() { return Active().name; }

common::Status AttentionVarlenForward(float* out, float* lse, const float* q, const float* k,
                                      const float* v, std::span<const int32_t> cu_seqlens,
                                      const VarlenShape& shape, AttentionWorkspace* ws) {
  EMBODY_RETURN_IF_ERROR(CheckVarlenShape(shape, cu_seqlens));
  Active().forward(out, lse, q, k, v, cu_seqlens, shape, ws);
  return common::Status::Ok();
}

common::Status AttentionVarlenBackward(float* dq, float* dk, float* dv, const float* dout,
                                       const float* q, const float* k, const float* v,
                                       const float* out, const float* lse,
                                       std::span<const int32_t> cu_seqlens,
                                       const VarlenShape& shape, AttentionWorkspace* ws) {
  EMBODY_RETURN_IF_ERROR(CheckVarlenShape(shape, cu_seqlens));
  Active().backward(dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, shape, ws);
  return common::Status::Ok();
}

}  // namespace engine::kernels
