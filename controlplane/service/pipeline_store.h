// Where pipelines are kept (table pipelines, migration 0021): one row per pipeline with its
// validated spec, its owner (the token that submitted it, whose tenant every step's job runs
// in) and the state of each step, written whole by the driver in the unit of work that decided
// it. Used through a UnitOfWork like every store (store.h); pipelines_service.h and
// pipeline_driver.h hold the rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace controlplane::service {

// Pipeline states. cancelling: cancelled by a tenant, its steps' jobs not all ended yet.
inline constexpr const char* kPipelineRunning = "running";
inline constexpr const char* kPipelineCancelling = "cancelling";
inline constexpr const char* kPipelineSucceeded = "succeeded";
inline constexpr const char* kPipelineFailed = "failed";
inline constexpr const char* kPipelineCancelled = "cancelled";

// Step states. pending: waiting for its needs (or its job's submission); running: its job of
// the current attempt has not ended; the others are final.
inline constexpr const char* kStepPending = "pending";
inline constexpr const char* kStepRunning = "running";
inline constexpr const char* kStepSucceeded = "succeeded";
inline constexpr const char* kStepFailed = "failed";
inline constexpr const char* kStepGateFailed = "gate_failed";
inline constexpr const char* kStepSkipped = "skipped";
inline constexpr const char* kStepCancelled = "cancelled";

bool IsFinalStepState(const std::string& state);

struct PipelineStepState {
  std::string name;
  std::string state = kStepPending;
  std::string reason;
  std::vector<int64_t> jobs;  // the job of each attempt, in order
  int64_t dataset_id = 0;     // an import step: the version it fills
  // The resolved JobSpec of the attempt being submitted (null: none): kept so that a submission
  // retried after a crash sends the same body under the same idempotency key.
  nlohmann::json submitting;
  nlohmann::json gate;  // a step with `when` once judged: the values compared (docs/pipelines.md)
  std::optional<int64_t> started_ms;
  std::optional<int64_t> finished_ms;
};

struct PipelineRecord {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;  // filled on reads
  int64_t token_id = 0;  // the owner: steps are submitted as this token
  std::string name;
  std::string state = kPipelineRunning;
  std::string reason;
  nlohmann::json spec = nlohmann::json::object();  // as submitted, after validation
  std::vector<PipelineStepState> steps;            // in the spec's order
  // Secret part of each step job's idempotency key (never shown): a tenant cannot take a key
  // the driver will use.
  std::string key;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::optional<int64_t> finished_ms;
};

struct PipelineQuery {
  std::optional<int64_t> tenant_id;  // nullopt: all tenants
  std::optional<int64_t> before_id;  // pagination cursor: ids strictly below
  int limit = 50;
};

class PipelineStore {
 public:
  virtual ~PipelineStore() = default;
  // Returns the new id.
  virtual common::Result<int64_t> Insert(const PipelineRecord& p) = 0;
  // A pipeline of `tenant_id` (nullopt: any); for_update locks it until the unit of work ends.
  virtual common::Result<std::optional<PipelineRecord>> Get(int64_t id,
                                                            std::optional<int64_t> tenant_id,
                                                            bool for_update) = 0;
  virtual common::Result<std::vector<PipelineRecord>> List(const PipelineQuery& q) = 0;  // newest first
  // The pipeline of `tenant_id` one of whose steps ran `job_id` (among its attempts' jobs).
  virtual common::Result<std::optional<PipelineRecord>> GetByJob(int64_t tenant_id,
                                                                 int64_t job_id) = 0;
  // Writes state, reason, steps and finished time; updated = now.
  virtual common::Status Update(const PipelineRecord& p, int64_t now_ms) = 0;
  // Ids of pipelines running or cancelling, oldest first, at most `limit`.
  virtual common::Result<std::vector<int64_t>> Active(int limit) = 0;
};

nlohmann::json StepsToJson(const std::vector<PipelineStepState>& steps);
// What StepsToJson wrote (a store's column); fields missing take their defaults.
std::vector<PipelineStepState> StepsFromJson(const nlohmann::json& j);

}  // namespace controlplane::service
