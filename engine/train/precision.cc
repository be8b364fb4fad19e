// engine.precision → LinearCompute (precision.h).
#include "engine/train/precision.h"

namespace engine {

PrecisionChoice ChoosePrecision(const std::string& requested, bool bf16_supported,
                                LinearCompute fp32_compute) {
  PrecisionChoice c;
  c.requested = requested;
  if (requested == "bf16" && bf16_supported) {
    c.used = "bf16";
    c.compute = LinearCompute::kOnednnBf16;
    return c;
  }
  c.used = "fp32";
  c.compute = fp32_compute;
  if (requested == "bf16") {
    c.warning =
        "this node's CPU has neither AVX512_BF16 nor AMX; the job runs its matrix products in "
        "fp32";
  }
  return c;
}

nlohmann::json PrecisionEvent(const PrecisionChoice& choice) {
  nlohmann::json ev = {{"type", "precision"},
                       {"requested", choice.requested},
                       {"used", choice.used},
                       {"gemm", LinearComputeName(choice.compute)}};
  if (!choice.warning.empty()) ev["warning"] = choice.warning;
  return ev;
}

PrecisionChoice ApplyPrecision(const std::string& requested) {
  PrecisionChoice c = ChoosePrecision(requested, Bf16ComputeSupported(), DefaultFp32Compute());
  SetLinearCompute(c.compute);
  return c;
}

}  // namespace engine
