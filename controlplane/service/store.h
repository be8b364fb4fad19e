// The control plane's view of its state of record: records and one small store interface per
// aggregate (jobs, allocations, nodes, events, logs, tenants), all used through a UnitOfWork that
// is one database transaction.
//
// service/ holds the business rules and sees only these interfaces; controlplane/db implements
// them over PostgreSQL, and tests may implement them in memory. Every method of a store runs in
// the unit of work that handed it out; nothing is visible to others before Commit.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "api/job_state.h"
#include "common/status.h"

namespace controlplane::service {

using common::Result;
using common::Status;

// Who is calling: resolved from a bearer token.
struct Principal {
  int64_t tenant_id = 0;
  std::string tenant;
  std::string role;  // "cluster-admin", "tenant-admin", "member", "viewer", "agent"
  bool IsClusterAdmin() const { return role == "cluster-admin"; }
  // Scope of tenant-owned queries: nullopt means every tenant.
  std::optional<int64_t> TenantScope() const {
    return IsClusterAdmin() ? std::nullopt : std::optional<int64_t>(tenant_id);
  }
};

struct JobRecord {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;
  std::string name;
  std::string kind;
  api::JobState state = api::JobState::kPending;
  std::string reason;
  int priority = 0;
  nlohmann::json spec;
  int attempt = 0;
  std::optional<int> exit_code;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::optional<int64_t> started_ms;
  std::optional<int64_t> finished_ms;
};

struct NewJob {
  int64_t tenant_id = 0;
  std::string name;
  std::string kind;
  int priority = 0;
  nlohmann::json spec;
  std::string idempotency_key;  // "" when the client sent none
  int64_t now_ms = 0;
};

struct JobQuery {
  std::optional<int64_t> tenant_id;  // nullopt: all tenants
  std::optional<api::JobState> state;
  std::optional<int64_t> before_id;  // pagination cursor: ids strictly below
  int limit = 50;
};

class JobStore {
 public:
  virtual ~JobStore() = default;
  // Returns the new id, or already_exists when (tenant, idempotency_key) is taken.
  virtual Result<int64_t> Insert(const NewJob& job) = 0;
  // for_update locks the row until the unit of work ends.
  virtual Result<std::optional<JobRecord>> Get(int64_t id, std::optional<int64_t> tenant_id,
                                               bool for_update) = 0;
  virtual Result<std::optional<JobRecord>> GetByIdempotencyKey(int64_t tenant_id,
                                                               const std::string& key) = 0;
  virtual Result<std::vector<JobRecord>> List(const JobQuery& q) = 0;  // newest first
  // Jobs in any of `states`, oldest first, locked for update.
  virtual Result<std::vector<JobRecord>> ListInStates(const std::vector<api::JobState>& states) = 0;
  // Writes state, reason, attempt, exit_code, started/finished/updated times.
  virtual Status Update(const JobRecord& job) = 0;
  // Number of jobs per (state, tenant name), for the embody_jobs gauge.
  virtual Result<std::map<std::pair<std::string, std::string>, int64_t>>
  CountByStateAndTenant() = 0;
};

struct AllocationRecord {
  int64_t job_id = 0;
  int64_t node_id = 0;
  std::string node_name;     // filled on reads
  std::string node_address;  // filled on reads
  int ranks = 0;
  int slots = 0;
  std::string slot_type;
  bool is_head = false;
  bool launched = false;
};

class AllocationStore {
 public:
  virtual ~AllocationStore() = default;
  virtual Status Insert(const AllocationRecord& a) = 0;
  // Live (unreleased) allocations, head first: what holds slots now.
  virtual Result<std::vector<AllocationRecord>> ForJob(int64_t job_id) = 0;
  // Where the job's latest attempt ran or runs, released or not, head first.
  virtual Result<std::vector<AllocationRecord>> PlacementForJob(int64_t job_id) = 0;
  virtual Result<std::vector<AllocationRecord>> ForNode(int64_t node_id) = 0;
  virtual Result<std::vector<AllocationRecord>> All() = 0;
  virtual Status MarkLaunched(int64_t job_id, int64_t node_id) = 0;
  // Frees the slots but keeps the record (terminal states, RESTARTING).
  virtual Status ReleaseForJob(int64_t job_id) = 0;
  // Forgets the placement (a job back in PENDING gets a new one).
  virtual Status DeleteForJob(int64_t job_id) = 0;
};

struct NodeRecord {
  int64_t id = 0;
  std::string name;
  std::string address;
  std::string agent_url;
  int cpu_slots = 0;
  int64_t memory_bytes = 0;
  nlohmann::json gpus = nlohmann::json::array();
  int64_t last_heartbeat_ms = 0;
  std::string state;  // "UP" | "DOWN"
};

class NodeStore {
 public:
  virtual ~NodeStore() = default;
  // Creates the node or refreshes the one with the same name (keeping its id); marks it UP.
  virtual Result<int64_t> Upsert(const api::RegisterRequest& r, int64_t now_ms) = 0;
  virtual Result<std::optional<NodeRecord>> Get(int64_t id) = 0;
  virtual Result<std::vector<NodeRecord>> List() = 0;  // by id
  // Records a heartbeat and marks the node UP.
  virtual Status Touch(int64_t id, int64_t now_ms) = 0;
  virtual Status SetState(int64_t id, const std::string& state) = 0;
};

struct EventRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t time_ms = 0;
  std::string type;
  nlohmann::json data;
};

struct CheckpointRecord {
  int64_t step = 0;
  std::string path;
  int64_t bytes = 0;
};

// One step event as the metrics history reads it.
struct StepSample {
  int64_t step = 0;
  int64_t time_ms = 0;
  nlohmann::json data;
};

struct StepQuery {
  int64_t since_step = INT64_MIN;  // steps >= this
  int64_t since_ms = 0;            // and times >= this
  int max_points = 500;
};

class EventStore {
 public:
  virtual ~EventStore() = default;
  virtual Result<int64_t> Append(int64_t job_id, int64_t time_ms, const std::string& type,
                                 const nlohmann::json& data) = 0;
  // A `step` event with its step. `provisional`: the thinning policy does not keep this step;
  // the row stands for the job's latest step until DropProvisionalSteps removes it.
  virtual Result<int64_t> AppendStep(int64_t job_id, int64_t time_ms, int64_t step,
                                     const nlohmann::json& data, bool provisional) = 0;
  virtual Status DropProvisionalSteps(int64_t job_id) = 0;
  // The job's step events matching `q`, bucketed by step: [first, last] step is cut into at most
  // max_points buckets of equal width and each bucket answers with its latest event (highest
  // step, then newest row, so a restarted job's newer attempt wins). Ordered by step.
  virtual Result<std::vector<StepSample>> SampleSteps(int64_t job_id, const StepQuery& q) = 0;
  // Events with id > after_id, oldest first; `type` "" means every type.
  virtual Result<std::vector<EventRecord>> List(int64_t job_id, int64_t after_id,
                                                const std::string& type, int limit) = 0;
  virtual Result<std::optional<EventRecord>> Latest(int64_t job_id, const std::string& type) = 0;
  virtual Status AddCheckpoint(int64_t job_id, const CheckpointRecord& c, int64_t time_ms) = 0;
  virtual Result<std::optional<CheckpointRecord>> LatestCheckpoint(int64_t job_id) = 0;
};

struct LogRecord {
  int rank = 0;  // -1: the launcher
  std::string path;
  int64_t bytes = 0;
};

class LogIndex {
 public:
  virtual ~LogIndex() = default;
  virtual Status Upsert(int64_t job_id, const LogRecord& log) = 0;
  virtual Result<std::vector<LogRecord>> ForJob(int64_t job_id) = 0;  // by rank
};

class TenantStore {
 public:
  virtual ~TenantStore() = default;
  // Serialises bootstraps of replicas starting together (held until the unit of work ends).
  virtual Status LockBootstrap() = 0;
  virtual Result<int64_t> CountTenants() = 0;
  virtual Result<int64_t> CreateTenant(const std::string& name) = 0;
  virtual Status CreateToken(const std::string& sha256_hex, int64_t tenant_id,
                             const std::string& role, const std::string& name) = 0;
  virtual Result<std::optional<Principal>> FindToken(const std::string& sha256_hex) = 0;
};

// One transaction. Rolled back when destroyed without Commit.
class UnitOfWork {
 public:
  virtual ~UnitOfWork() = default;
  virtual JobStore& jobs() = 0;
  virtual AllocationStore& allocations() = 0;
  virtual NodeStore& nodes() = 0;
  virtual EventStore& events() = 0;
  virtual LogIndex& logs() = 0;
  virtual TenantStore& tenants() = 0;
  virtual Status Commit() = 0;
};

class Database {
 public:
  virtual ~Database() = default;
  virtual Result<std::unique_ptr<UnitOfWork>> Begin() = 0;
};

}  // namespace controlplane::service

// Evaluates a Result-returning expression; returns its Status on failure, else binds the value.
#define EMBODY_ASSIGN_OR_RETURN(lhs, expr)          \
  auto lhs##_result = (expr);                       \
  if (!lhs##_result.ok()) return lhs##_result.status(); \
  auto lhs = std::move(lhs##_result.value())
