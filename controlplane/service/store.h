// The control plane's view of its state of record: records and one small store interface per
// aggregate (jobs, allocations, nodes, events, logs, tenants), all used through a UnitOfWork that
// is one database transaction.
//
// service/ holds the business rules and sees only these interfaces; controlplane/db implements
// them over PostgreSQL, and controlplane/testing/memory_database.h is their in-memory twin, on
// which the service unit tests run (testing/store_conformance.h holds both to one contract).
// Every method of a store runs in the unit of work that handed it out; nothing is visible to
// others before Commit.
#pragma once

#include <algorithm>
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

// Who is calling: resolved from a bearer token (roles.h says what each role may do).
struct Principal {
  int64_t token_id = 0;
  std::string token_name;
  int64_t tenant_id = 0;
  std::string tenant;
  // "cluster-admin", "tenant-admin", "member", "viewer" (people); "agent" (the cluster join
  // token: registers nodes); "node" (one node's credential).
  std::string role;
  int64_t node_id = 0;  // role "node": the node this credential acts for
  bool IsClusterAdmin() const { return role == "cluster-admin"; }
  // Scope of tenant-owned queries: nullopt means every tenant.
  std::optional<int64_t> TenantScope() const {
    return IsClusterAdmin() ? std::nullopt : std::optional<int64_t>(tenant_id);
  }
};

struct JobRecord {
  int64_t id = 0;
  int64_t tenant_id = 0;
  int64_t token_id = 0;        // the token that submitted it (0: unknown)
  std::string request_sha256;  // digest of the submitted body when it had an Idempotency-Key
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
  // Changes whenever the row is written (PostgreSQL: its xmin), so a reader that kept the record
  // can tell whether it is still the row's; 0 where the read does not fill it (List).
  int64_t version = 0;
};

struct JobVersion {
  int64_t id = 0;
  int64_t version = 0;
};

struct NewJob {
  int64_t tenant_id = 0;
  int64_t token_id = 0;
  std::string request_sha256;
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
  std::string name_contains;  // "" : any name
  std::optional<int64_t> before_id;  // pagination cursor: ids strictly below
  int limit = 50;
};

class JobStore {
 public:
  virtual ~JobStore() = default;
  // Returns the new id, or already_exists when (tenant, idempotency_key) is taken.
  virtual Result<int64_t> Insert(const NewJob& job) = 0;
  // Insert for many jobs (the submission batcher), in one statement where the store can; their
  // ids in the order given, increasing. already_exists when any key is taken: some of the others
  // may be written then, so the unit of work is to be abandoned. Loops over Insert unless
  // overridden.
  virtual Result<std::vector<int64_t>> InsertMany(const std::vector<NewJob>& jobs);
  // for_update locks the row until the unit of work ends.
  virtual Result<std::optional<JobRecord>> Get(int64_t id, std::optional<int64_t> tenant_id,
                                               bool for_update) = 0;
  virtual Result<std::optional<JobRecord>> GetByIdempotencyKey(int64_t tenant_id,
                                                               const std::string& key) = 0;
  // The jobs among `ids` that exist, by id, in one read (a heartbeat names many). for_update
  // locks them, in id order so two callers cannot deadlock. Loops over Get unless overridden.
  virtual Result<std::vector<JobRecord>> GetMany(const std::vector<int64_t>& ids,
                                                 bool for_update);
  virtual Result<std::vector<JobRecord>> List(const JobQuery& q) = 0;  // newest first
  // Jobs in any of `states`, oldest first; for_update locks them until the unit of work ends.
  virtual Result<std::vector<JobRecord>> ListInStates(const std::vector<api::JobState>& states,
                                                      bool for_update) = 0;
  // The PENDING jobs' ids and versions, id ascending: what a reader that keeps their records
  // needs to read again (the scheduler loop's, scheduler_loop.h).
  virtual Result<std::vector<JobVersion>> PendingVersions() = 0;
  // Writes state, reason, attempt, exit_code, started/finished/updated times.
  virtual Status Update(const JobRecord& job) = 0;
  // Sets the reason (and updated time) of each of these jobs that is still PENDING, in one
  // write, without reading them first; returns the new versions of the rows it wrote.
  virtual Result<std::vector<JobVersion>> SetWaitingReasons(
      const std::vector<std::pair<int64_t, std::string>>& reasons, int64_t now_ms) = 0;
  // Jobs of one tenant in any of `states`.
  virtual Result<int64_t> CountForTenant(int64_t tenant_id,
                                         const std::vector<api::JobState>& states) = 0;
  // The tenant's PENDING jobs, as this unit of work sees them; cheap however long the queue
  // (the pending-jobs quota is checked at every submission).
  virtual Result<int64_t> PendingCount(int64_t tenant_id) = 0;
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
  // The head agent acknowledged the launch (it listed it in a heartbeat, or reported the job
  // running or ended).
  bool launched = false;
  int launch_sends = 0;  // heartbeat replies that carried the launch
  // The attempt's job token (one for every node of the placement; docs/multinode.md). Cleared
  // when the placement is released.
  std::string job_token;
  std::string node_agent_url;  // filled on reads
};

// Whether the job may have started on its head node: a launch was handed out (and may have
// arrived) or was acknowledged. A job for which this is false can be cancelled or requeued at once.
inline bool LaunchSent(const AllocationRecord& a) { return a.launched || a.launch_sends > 0; }

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
  // Batch forms of ForJob and PlacementForJob for lists and heartbeats: one read for many jobs,
  // keyed by job id (a job without allocations has no entry). Loop unless overridden.
  virtual Result<std::map<int64_t, std::vector<AllocationRecord>>> ForJobs(
      const std::vector<int64_t>& job_ids);
  virtual Result<std::map<int64_t, std::vector<AllocationRecord>>> PlacementForJobs(
      const std::vector<int64_t>& job_ids);
  // The head agent acknowledged the launch.
  virtual Status MarkLaunched(int64_t job_id, int64_t node_id) = 0;
  // One more heartbeat reply carries the launch (launch_sends + 1).
  virtual Status CountLaunchSent(int64_t job_id, int64_t node_id) = 0;
  // Batch forms of the two above for the allocations of `job_ids` on one node.
  virtual Status MarkLaunchedMany(const std::vector<int64_t>& job_ids, int64_t node_id);
  virtual Status CountLaunchesSent(const std::vector<int64_t>& job_ids, int64_t node_id);
  // Frees the slots but keeps the record (terminal states).
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
  bool draining = false;
  nlohmann::json isolation = nlohmann::json::object();  // api::NodeIsolation as JSON
};

// `count` nodes with these many cpu slots and gpus.
struct NodeShape {
  int cpu_slots = 0;
  int gpus = 0;
  int64_t count = 0;
};

class NodeStore {
 public:
  virtual ~NodeStore() = default;
  // Creates the node or refreshes the one with the same name (keeping its id); marks it UP.
  // Who may do so is the service's decision (node credentials), not the store's.
  virtual Result<int64_t> Upsert(const api::RegisterRequest& r, int64_t now_ms) = 0;
  virtual Result<std::optional<NodeRecord>> Get(int64_t id) = 0;
  virtual Result<std::optional<NodeRecord>> GetByName(const std::string& name) = 0;
  virtual Status SetDraining(int64_t id, bool draining) = 0;
  virtual Result<std::vector<NodeRecord>> List() = 0;  // by id
  // Every registered node counted by size (cpu slots, gpus), whatever its state.
  virtual Result<std::vector<NodeShape>> Shapes() = 0;
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

// One task's result of an evaluation (kind eval's `eval` event; docs/eval.md).
struct EvaluationRecord {
  std::string task;
  int episodes = 0;
  int successes = 0;
  double success_rate = 0.0;
  double mean_return = 0.0;
  double mean_length = 0.0;
  int64_t checkpoint_step = 0;
  std::string policy;  // "bc", "rl"
  bool fp8 = false;
  int64_t time_ms = 0;
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
  // Append for many events (job_id, time_ms, type, data of each; id unused), in one statement
  // where the store can. Loops over Append unless overridden.
  virtual Status AppendMany(const std::vector<EventRecord>& events);
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
  // Latest for many jobs in one read, keyed by job id (no entry: no such event). Loops unless
  // overridden.
  virtual Result<std::map<int64_t, EventRecord>> LatestOfJobs(const std::vector<int64_t>& job_ids,
                                                              const std::string& type);
  virtual Status AddCheckpoint(int64_t job_id, const CheckpointRecord& c, int64_t time_ms) = 0;
  // The latest checkpoint the job reported writing on its node's disk (not blob-store uploads).
  virtual Result<std::optional<CheckpointRecord>> LatestCheckpoint(int64_t job_id) = 0;
  // LatestCheckpoint for many jobs in one read, keyed by job id. Loops unless overridden.
  virtual Result<std::map<int64_t, CheckpointRecord>> LatestCheckpoints(
      const std::vector<int64_t>& job_ids);
  // Evaluation results (job_evaluations), one row per task; a later evaluation of the same task
  // (a restarted eval job) replaces the earlier row.
  virtual Status PutEvaluation(int64_t job_id, const EvaluationRecord& r) = 0;
  // The job's rows, by task name.
  virtual Result<std::vector<EvaluationRecord>> Evaluations(int64_t job_id) = 0;
};

// One rank's log of one attempt of a job: each attempt writes its own, from offset 0.
struct LogRecord {
  int rank = 0;  // -1: the launcher
  std::string path;
  int64_t bytes = 0;
  int attempt = 0;
};

class LogIndex {
 public:
  virtual ~LogIndex() = default;
  virtual Status Upsert(int64_t job_id, const LogRecord& log) = 0;
  // Every attempt's, by attempt then rank.
  virtual Result<std::vector<LogRecord>> ForJob(int64_t job_id) = 0;
  // Retention (service/history_retention.h): up to `limit` jobs that finished before
  // `finished_before_ms` and still have history (log rows, or events other than state changes),
  // oldest first.
  virtual Result<std::vector<int64_t>> FinishedWithHistory(int64_t finished_before_ms,
                                                           int limit) = 0;
  // Deletes the job's log rows and every event of it but its state changes (who, when, why stay).
  virtual Status PruneHistory(int64_t job_id) = 0;
};

// A tenant's limits; nullopt: no limit.
struct Quota {
  std::optional<int> slots;          // slots its running jobs may hold at once
  std::optional<int> running_jobs;   // jobs SCHEDULED or RUNNING at once
  std::optional<int> pending_jobs;   // jobs waiting (PENDING); past it a submit is refused (429)
  std::optional<int> nodes_per_job;  // nodes one job may ask for; past it a submit is refused (422)
  // The highest priority its members and tenant-admins may give a job; past it a submit is
  // refused (403). nullopt: the server's --default-max-priority.
  std::optional<int> max_priority;
  // Bytes its stored dataset versions (images included) and checkpoints may hold together
  // (service/storage_quota.h); past it an upload, import or checkpoint is refused (429).
  std::optional<int64_t> storage_bytes;
};

struct TenantRecord {
  int64_t id = 0;
  std::string name;
  double weight = 1.0;  // fair-share weight, > 0
  Quota quota;
  int64_t version = 1;  // bumped by every update; the ETag of PATCH /v1/tenants/{id}
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

// What a tenant holds right now.
struct TenantUsageNow {
  int64_t slots_in_use = 0;
  int64_t running_jobs = 0;  // SCHEDULED, RUNNING, CANCELLING, RESTARTING
  int64_t pending_jobs = 0;
  // What counts against quota.storage_bytes; filled from the dataset and checkpoint stores
  // (storage_quota.h StorageUsed), not by UsageNow.
  int64_t storage_bytes = 0;
};

struct TokenRecord {
  int64_t id = 0;
  int64_t tenant_id = 0;
  std::string tenant;
  std::string role;
  std::string name;
  int64_t node_id = 0;     // role "node"
  int64_t created_by = 0;  // token id, 0: bootstrap
  int64_t created_ms = 0;
  std::optional<int64_t> expires_ms;
  std::optional<int64_t> revoked_ms;
};

struct NewToken {
  std::string sha256_hex;
  int64_t tenant_id = 0;
  std::string role;
  std::string name;
  std::optional<int64_t> expires_ms;
  int64_t node_id = 0;
  int64_t created_by = 0;
  int64_t now_ms = 0;
};

// A token looked up by digest, whatever its state: the caller decides what expired and revoked
// tokens mean (401 with a reason).
struct TokenMatch {
  Principal principal;
  std::string sha256_hex;  // as stored, compared again in constant time by the caller
  std::optional<int64_t> expires_ms;
  std::optional<int64_t> revoked_ms;
};

class TenantStore {
 public:
  virtual ~TenantStore() = default;
  // Serialises bootstraps of replicas starting together (held until the unit of work ends).
  virtual Status LockBootstrap() = 0;
  virtual Result<int64_t> CountTenants() = 0;
  // already_exists when the name is taken.
  virtual Result<int64_t> CreateTenant(const TenantRecord& t, int64_t now_ms) = 0;
  virtual Result<std::optional<TenantRecord>> GetTenant(int64_t id, bool for_update) = 0;
  // Every tenant, or only `only`; by id.
  virtual Result<std::vector<TenantRecord>> ListTenants(std::optional<int64_t> only) = 0;
  // Writes name, weight and quota and bumps the version. already_exists for a taken name.
  virtual Status UpdateTenant(const TenantRecord& t, int64_t now_ms) = 0;
  virtual Result<TenantUsageNow> UsageNow(int64_t tenant_id) = 0;

  virtual Result<int64_t> CreateToken(const NewToken& t) = 0;
  // Tokens of one tenant (or all: nullopt), by id; never node credentials of other tenants.
  virtual Result<std::vector<TokenRecord>> ListTokens(std::optional<int64_t> tenant_id) = 0;
  virtual Result<std::optional<TokenRecord>> GetToken(int64_t id, std::optional<int64_t> tenant_id) = 0;
  virtual Status RevokeToken(int64_t id, int64_t now_ms) = 0;
  // Whether the node holds a credential neither revoked nor expired at `now_ms`.
  virtual Result<bool> HasLiveNodeToken(int64_t node_id, int64_t now_ms) = 0;
  // Revokes every live credential of a node (it is registering anew).
  virtual Status RevokeNodeTokens(int64_t node_id, int64_t now_ms) = 0;
  virtual Result<std::optional<TokenMatch>> FindToken(const std::string& sha256_hex) = 0;
};

struct AuditRecord {
  int64_t id = 0;
  int64_t time_ms = 0;
  int64_t token_id = 0;
  std::string actor;  // token name, "anonymous" without a valid token
  std::string role;
  int64_t tenant_id = 0;         // caller's tenant (0: none)
  std::string tenant;            // filled on reads
  int64_t target_tenant_id = 0;  // tenant of the target, when the route names one (0: none)
  std::string method;
  std::string route;  // pattern, e.g. /v1/jobs/{id}/cancel
  std::string path;
  std::string target;  // e.g. "job 12", "token 4"
  int status = 0;
  std::string outcome;  // "ok" or the error code
  std::string request_id;
};

struct AuditQuery {
  // Rows about this tenant's resources, and those by its own people (not by cluster-admins,
  // whose tenant is only where their token was made); nullopt: all.
  std::optional<int64_t> tenant_id;
  std::optional<int64_t> before_id;
  int limit = 100;
};

class AuditStore {
 public:
  virtual ~AuditStore() = default;
  // Returns the new row's id.
  virtual Result<int64_t> Append(const AuditRecord& r) = 0;
  // Append for many rows, in one statement where the store can; their ids in the order given,
  // increasing. Loops over Append unless overridden.
  virtual Result<std::vector<int64_t>> AppendMany(const std::vector<AuditRecord>& rows);
  // Rewrites what a row says of the call's result (status, outcome, target, target tenant): for
  // a row written inside the call's transaction before its answer was final (audit_scope.h).
  virtual Status Amend(int64_t id, const AuditRecord& r) = 0;
  virtual Result<std::vector<AuditRecord>> List(const AuditQuery& q) = 0;  // newest first
  // Deletes at most `limit` rows older than `before_ms`, oldest first; returns how many.
  virtual Result<int64_t> DeleteBefore(int64_t before_ms, int limit) = 0;
};

class FairShareStore;   // fair_share_store.h
class CheckpointIndex;  // checkpoint_index.h
class DatasetStore;     // dataset_store.h
class LeaderFence;      // leader_fence.h
class ForecastStore;    // forecast_store.h
class PipelineStore;    // pipeline_store.h

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
  virtual AuditStore& audit() = 0;
  virtual FairShareStore& fair_share() = 0;
  virtual CheckpointIndex& checkpoints() = 0;
  virtual DatasetStore& datasets() = 0;
  virtual LeaderFence& leader() = 0;
  virtual ForecastStore& forecasts() = 0;
  virtual PipelineStore& pipelines() = 0;
  virtual Status Commit() = 0;
};

class Database {
 public:
  virtual ~Database() = default;
  virtual Result<std::unique_ptr<UnitOfWork>> Begin() = 0;
};

}  // namespace controlplane::service
