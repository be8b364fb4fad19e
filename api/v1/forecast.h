// A job's forecast as the API shows it (POST /v1/jobs?dry_run=true, GET /v1/jobs/{id}/forecast,
// each step of POST /v1/pipelines?dry_run=true) and the forecast stored for a submitted job;
// schemas Forecast and StoredForecast of docs/api/openapi.yaml. How forecasts are made is the
// server's (controlplane/service/forecast_service.h).
//
// One type for the schema's three shapes: a dry run's answer (a start, where its cluster came
// from, `dry_run`), a pending job's (a start, where its cluster came from, the job), and a job
// holding slots (no start: `started_at` and the job). Which parts a forecast has is what its
// optional members say; ToJson writes exactly those parts, and ParseForecast reads a part when
// its first field is there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

// One node of a predicted placement.
struct ForecastNode {
  int64_t node_id = 0;
  std::string node;  // its name
  int ranks = 0;
  int slots = 0;
  bool operator==(const ForecastNode&) const = default;
};

// Where the job would start, the head node first.
struct ForecastPlacement {
  std::string slot_type;
  std::vector<ForecastNode> nodes;
  bool operator==(const ForecastPlacement&) const = default;
};

// When a job not yet placed is predicted to start.
struct ForecastStart {
  bool starts_now = false;          // the scheduler's next cycle would place it
  std::optional<int64_t> start_ms;  // nullopt: no start can be predicted (reasons say why)
  std::optional<double> wait_seconds;
  std::optional<ForecastPlacement> placement;  // set when start_ms is
  int64_t jobs_ahead = 0;                      // pending jobs the scheduler considers before it now
  bool operator==(const ForecastStart&) const = default;
};

// The cluster a start forecast was run on.
struct ForecastCluster {
  int64_t as_of_ms = 0;          // when it was taken
  std::string from;              // scheduler_snapshot | scheduler_plan | store
  double hand_over_seconds = 0;  // the server's learned hand-over, added per job handed slots
  bool operator==(const ForecastCluster&) const = default;
};

// The forecast made when a job was submitted, and how it came out: actual minus predicted, in
// seconds, once the job started (ended).
struct StoredForecast {
  int64_t made_ms = 0;
  std::optional<int64_t> start_ms;
  std::optional<double> run_seconds;
  std::optional<int64_t> end_ms;
  std::optional<double> start_error_seconds;
  std::optional<double> end_error_seconds;
  bool operator==(const StoredForecast&) const = default;
};

// The job a forecast of GET /v1/jobs/{id}/forecast is about.
struct ForecastJob {
  int64_t job_id = 0;
  std::string state;                        // its JobState's name ("PENDING")
  std::optional<StoredForecast> submitted;  // nullopt: none was stored (null on the wire)
  bool operator==(const ForecastJob&) const = default;
};

struct Forecast {
  int64_t made_ms = 0;
  std::optional<double> run_seconds;
  std::optional<std::string> run_time_source;  // planner | history | time_limit; nullopt: none
  std::optional<int64_t> end_ms;
  std::vector<std::string> reasons;  // what it waits on, and what is unknown
  // A dry run's or a pending job's. Without it the job holds slots, and started_ms is written
  // (null when the job has not reported its start).
  std::optional<ForecastStart> start;
  std::optional<int64_t> started_ms;
  std::optional<ForecastCluster> cluster;  // with every start the API answers
  // A dry run's answer: `dry_run` and `admitted` are written, both true (a refused dry run is
  // an error, not a forecast).
  bool dry_run = false;
  std::optional<ForecastJob> job;  // GET /v1/jobs/{id}/forecast's
  bool operator==(const Forecast&) const = default;
};

nlohmann::json ToJson(const StoredForecast& f);
nlohmann::json ToJson(const Forecast& f);
// Refuse a field of the wrong type or a missing required one, naming it
// ("placement.nodes[0].ranks", "submitted_forecast.made_at").
common::Result<StoredForecast> ParseStoredForecast(const nlohmann::json& j);
common::Result<Forecast> ParseForecast(const nlohmann::json& j);

class FieldReader;
// The forecast `r` reads, for the views that hold one (pipeline.h); errors go to `r`.
Forecast ReadForecast(FieldReader& r);

}  // namespace api::v1
