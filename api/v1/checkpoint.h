// A checkpoint in the server's blob store as the API shows it (POST /v1/jobs/{id}/checkpoints,
// GET .../checkpoints/{checkpoint_id}, POST .../commit), a job's checkpoints listing, and the
// answer to one upload chunk; schema Checkpoint of docs/api/openapi.yaml, the listing and chunk
// replies of its paths. The upload's request bodies are parsed by the server's own rules
// (controlplane/service/checkpoints_service.h); what a launch resumes from is the agent
// protocol's (api/agent_protocol.h CheckpointRef), not this.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

struct Checkpoint {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t step = 0;
  int64_t bytes = 0;                      // declared at the start of the upload
  std::string sha256;                     // declared, lower-case hex
  std::map<std::string, double> metrics;  // what the uploader reported (engine.checkpoint.best)
  std::string state;                      // "uploading" | "ready"
  int64_t received_bytes = 0;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  bool operator==(const Checkpoint&) const = default;
};

// A job's ready checkpoints, ascending by step.
struct CheckpointList {
  std::vector<Checkpoint> checkpoints;
  bool operator==(const CheckpointList&) const = default;
};

// The answer to one chunk: the bytes the server now holds.
struct CheckpointUploadProgress {
  int64_t received_bytes = 0;
  bool operator==(const CheckpointUploadProgress&) const = default;
};

nlohmann::json ToJson(const Checkpoint& c);
nlohmann::json ToJson(const CheckpointList& l);
nlohmann::json ToJson(const CheckpointUploadProgress& p);
// Each refuses a field of the wrong type or a missing required one, naming it.
common::Result<Checkpoint> ParseCheckpoint(const nlohmann::json& j);
common::Result<CheckpointList> ParseCheckpointList(const nlohmann::json& j);
common::Result<CheckpointUploadProgress> ParseCheckpointUploadProgress(const nlohmann::json& j);
// The metrics object as stored ({"name": number}), naming a value that is not a number.
common::Result<std::map<std::string, double>> ParseCheckpointMetrics(const nlohmann::json& j);

}  // namespace api::v1
