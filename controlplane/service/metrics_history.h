// Metrics history: the step series of every job, kept in PostgreSQL (job_events rows of type
// `step`) so the dashboard and the CLI can chart any job without a Prometheus server, and read
// back by GET /v1/jobs/{id}/metrics.
//
// Write side, thinning. A job posts one step event per step; long jobs would grow without bound.
// Every step up to kKeepEveryStepUpTo is kept; after that a step is kept when it is a multiple
// of its stride, which doubles each time the step doubles: steps in (K, 2K] every 2nd, (2K, 4K]
// every 4th, ... So every doubling of the job's length adds K/2 rows, and a job of S steps keeps
// at most K + K/2 * ceil(log2(S/K)) rows (about 3,000 for 10,000 steps, 6,000 for a million),
// plus one: the job's latest step event is always stored, marked provisional when the policy
// would not keep it, and replaced by the next heartbeat's (so GET /v1/jobs/{id}'s last_step is
// never behind). Step events without a numeric `step` are stored as they are and not charted.
//
// Read side, downsampling. The stored steps in the requested range are cut into at most
// max_points buckets of equal width in steps; each bucket answers with its latest event. A
// series therefore covers the whole range with at most max_points points, ending at the last
// stored step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controlplane/service/store.h"

namespace controlplane::service {

inline constexpr int64_t kKeepEveryStepUpTo = 1000;
inline constexpr int kDefaultMaxPoints = 500;
inline constexpr int kMaxMaxPoints = 5000;
inline constexpr size_t kMaxSeriesNames = 32;    // names= in one request
inline constexpr size_t kMaxDefaultSeries = 64;  // without names=: the first 64 numeric fields
inline constexpr size_t kMaxSeriesNameLength = 64;

// 1 up to kKeepEveryStepUpTo, then the smallest power of two p with step <= K * p.
int64_t StepStride(int64_t step);
// Whether the step event of `step` is kept for good.
bool KeepStep(int64_t step);
// The integer `step` of a step event's data (a number, rounded down), if it has one.
std::optional<int64_t> StepOf(const nlohmann::json& data);

struct MetricsRequest {
  std::vector<std::string> names;  // empty: every numeric field
  StepQuery query;
};

// From the query parameters of GET /v1/jobs/{id}/metrics, each "" when absent:
//   names=loss,tokens_per_s    fields of the step events ([A-Za-z0-9_], at most 32 names)
//   since=STEP | since=TIME    steps >= STEP, or events at or after an RFC 3339 UTC time
//                              ("2026-01-02T03:04:05Z", fraction optional)
//   max_points=N               1..5000, default 500
Result<MetricsRequest> ParseMetricsRequest(const std::string& names, const std::string& since,
                                           const std::string& max_points);

// {"series": {"loss": [[step, time_ms, value], ...], ...}}: one entry per requested name (or
// per numeric field seen, `step` aside, when no names were given); samples lacking a name or
// holding a non-number there give no point in that series.
nlohmann::json BuildSeries(const std::vector<std::string>& names,
                           const std::vector<StepSample>& samples);

}  // namespace controlplane::service
