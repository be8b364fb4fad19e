// What the two halves of the forecast service (forecast_service.cc answers, and
// forecast_service_thread.cc records and judges) share. Not part of the service's interface;
// include forecast_service.h.
#pragma once

#include <cstdint>
#include <optional>

#include "controlplane/service/forecast_service.h"

namespace controlplane::service::forecast_service_internal {

inline std::optional<int64_t> EndAfter(const std::optional<int64_t>& start, const RunTime& run) {
  if (!start || !run.seconds) return std::nullopt;
  return *start + static_cast<int64_t>(*run.seconds * 1000.0);
}

}  // namespace controlplane::service::forecast_service_internal
