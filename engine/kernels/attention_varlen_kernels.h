// The variable-length attention kernels (attention_varlen.h) behind one table of function
// pointers, one table per CPU path (engine/cpu/cpu_path.h): attention_varlen_sse2.cc (baseline
// x86-64), attention_varlen_avx2.cc and attention_varlen_avx512.cc, each the same source
// (attention_varlen_body.inc) compiled with its own instruction-set flags, so one binary built
// without -march runs the tile kernels at the width the CPU has. attention_varlen.cc checks
// shapes and picks the table once per process. Internal to engine/kernels.
#pragma once

#include <cstdint>
#include <span>

#include "engine/kernels/attention_varlen.h"
#include "engine/kernels/attention_workspace.h"

namespace engine::kernels {

struct VarlenKernels {
  const char* name;
  void (*forward)(float* out, float* lse, const float* q, const float* k, const float* v,
                  std::span<const int32_t> cu_seqlens, const VarlenShape& shape,
                  AttentionWorkspace* ws);
  void (*backward)(float* dq, float* dk, float* dv, const float* dout, const float* q,
                   const float* k, const float* v, const float* out, const float* lse,
                   std::span<const int32_t> cu_seqlens, const VarlenShape& shape,
                   AttentionWorkspace* ws);
};

const VarlenKernels& Sse2VarlenKernels();
const VarlenKernels& Avx2VarlenKernels();
const VarlenKernels& Avx512VarlenKernels();

}  // namespace engine::kernels
