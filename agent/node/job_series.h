// How a numeric field of a job's `step` event becomes a Prometheus series name.
//
// Any field a job reports is exported without code changes, as `embody_job_<field>`, after:
//   - sanitising: lower case, every character outside [a-z0-9_] becomes '_', runs of '_'
//     collapse, leading and trailing '_' go; nothing left, or over kMaxFieldLength, is refused;
//   - known renames to Prometheus base units and conventions: tokens_per_s → tokens_per_second,
//     samples_per_s → samples_per_second, lr → learning_rate, packing_efficiency →
//     packing_efficiency_ratio, mfu → mfu_ratio, steps (the planned total) → target_steps;
//   - unit suffixes: *_per_s → *_per_second, *_s / *_sec / *_secs → *_seconds,
//     *_ms → *_seconds (value × 1e-3), *_percent / *_pct → *_ratio (value × 0.01).
// Names the agent produces itself (steps_total, process_*) are refused so a job cannot shadow
// them. The phase times of the engine (data_wait_seconds, forward_seconds, ...) pass unchanged.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace agent {

struct JobSeriesName {
  std::string name;    // full metric name, "embody_job_..."
  double scale = 1.0;  // multiply the reported value by this to get the base unit
};

inline constexpr size_t kMaxFieldLength = 64;

std::optional<JobSeriesName> NameJobSeries(std::string_view field);

// Help text for a job series name: specific for the known ones, generic otherwise.
std::string JobSeriesHelp(const std::string& name);

}  // namespace agent
