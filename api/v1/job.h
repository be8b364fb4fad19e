// A job as the API shows it (GET /v1/jobs/{id}, POST /v1/jobs, POST /v1/jobs/{id}/cancel), a
// page of them (GET /v1/jobs), and a job's events (GET /v1/jobs/{id}/events); schemas Job,
// JobList, Event and EventList of docs/api/openapi.yaml. What a client sends to submit a job is
// the job spec (api/job_spec.h), not this.
//
// A page of a thousand jobs is the API's largest reply written often, so besides ToJson there
// is AppendJson: the same text, written row by row without building a tree of objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

// Ranks of the job on one node.
struct JobPlacement {
  int64_t node_id = 0;
  std::string node;
  int ranks = 0;
  bool operator==(const JobPlacement&) const = default;
};

struct JobCheckpoint {
  std::string path;
  int64_t step = 0;
  int64_t bytes = 0;
  bool operator==(const JobCheckpoint&) const = default;
};

struct Job {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;
  std::string name;
  std::string kind;    // train, rl, eval, command, import
  std::string state;   // JobState's name (PENDING, RUNNING, ...)
  std::string reason;  // "" when there is nothing to say
  int priority = 0;
  nlohmann::json spec;  // the stored job spec, carried whole
  int attempt = 0;      // restarts so far
  std::optional<int> exit_code;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::optional<int64_t> started_ms;
  std::optional<int64_t> finished_ms;
  // Seconds from its creation to its start (started_ms - created_ms); nullopt (null) until it
  // has started.
  std::optional<double> wait_seconds;
  std::vector<JobPlacement> allocation;
  std::optional<nlohmann::json> last_step;  // the newest step event's data; nullopt: null
  std::optional<JobCheckpoint> latest_checkpoint;
  // Parts of a single job's view only (GET /v1/jobs/{id}); nullopt: left out of the JSON. Each
  // is a document the server writes elsewhere (launch_phases.h, forecast_service.h, the
  // pipeline step's {"id", "name", "step", "attempt"}), carried whole; a JSON null in one is
  // written as null.
  std::optional<nlohmann::json> launch_phases;
  std::optional<nlohmann::json> forecast;
  std::optional<nlohmann::json> pipeline;
  bool operator==(const Job&) const = default;
};

// Newest first; `next_cursor` (null on the wire when nullopt) asks for the page after this one.
struct JobList {
  std::vector<Job> jobs;
  std::optional<std::string> next_cursor;
  bool operator==(const JobList&) const = default;
};

struct Event {
  int64_t id = 0;
  int64_t time_ms = 0;
  std::string type;     // "state", "step", "checkpoint", "eval", ...
  nlohmann::json data;  // its fields as the job or the server wrote them, carried whole
  bool operator==(const Event&) const = default;
};

struct EventList {
  std::vector<Event> events;
  bool operator==(const EventList&) const = default;
};

nlohmann::json ToJson(const Job& j);
nlohmann::json ToJson(const JobList& l);
nlohmann::json ToJson(const Event& e);
nlohmann::json ToJson(const EventList& l);

// Append ToJson(x).dump() as the server sends it (compact, invalid UTF-8 replaced as
// error_handler_t::replace does) to `out`, without building the object.
void AppendJson(const Job& j, std::string& out);
void AppendJson(const JobList& l, std::string& out);

// Each refuses a field of the wrong type or a missing required one, naming it.
common::Result<Job> ParseJob(const nlohmann::json& j);
common::Result<JobList> ParseJobList(const nlohmann::json& j);
common::Result<Event> ParseEvent(const nlohmann::json& j);
common::Result<EventList> ParseEventList(const nlohmann::json& j);

}  // namespace api::v1
