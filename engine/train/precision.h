// engine.precision (api/job_spec.h) applied to a process: which LinearCompute
// (engine/model/linear_fast.h) its Linear products run, and what the job is told.
//
// "bf16" on a CPU where oneDNN has no native bfloat16 (neither AVX512_BF16 nor AMX) falls back
// to float32 rather than failing the job: the node a job lands on is the scheduler's choice, not
// the submitter's, and the same spec must run everywhere. The job's events say so (a
// "precision" event with a warning), and its loss is then fp32's.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/model/linear_fast.h"

namespace engine {

struct PrecisionChoice {
  std::string requested;  // engine.precision
  std::string used;       // "fp32" or "bf16"
  LinearCompute compute = LinearCompute::kEigenFp32;
  std::string warning;  // why `used` differs from `requested`; empty when it does not
};

// Pure: the choice for `requested` ("fp32" or "bf16", as ParseJobSpec allows) on a CPU with or
// without native bf16; fp32 runs `fp32_compute` (DefaultFp32Compute() in the engine).
PrecisionChoice ChoosePrecision(const std::string& requested, bool bf16_supported,
                                LinearCompute fp32_compute);

// The job event for a choice: {"type":"precision", "requested", "used", "gemm"[, "warning"]}.
nlohmann::json PrecisionEvent(const PrecisionChoice& choice);

// Chooses for this CPU and sets the process's LinearCompute (before any step runs).
PrecisionChoice ApplyPrecision(const std::string& requested);

}  // namespace engine
