// PostgreSQL implementations of the service store interfaces, one class per aggregate, each bound
// to one open transaction (PgTx). PgDatabase hands out PgUnitOfWork, which owns the transaction
// and one instance of each store.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "controlplane/db/pg.h"
#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/forecast_store.h"
#include "controlplane/service/pipeline_store.h"
#include "controlplane/service/leader_fence.h"
#include "controlplane/service/store.h"

namespace controlplane::db {

// SQL fragments shared by the stores: timestamps cross the boundary as epoch milliseconds.
#define EMBODY_SQL_MS(col) "(extract(epoch from " col ") * 1000)::bigint"
#define EMBODY_SQL_TS(param) "to_timestamp(" param "::bigint / 1000.0)"

// Changes to each tenant's number of PENDING jobs made by one unit of work, by tenant id:
// applied to tenant_pending_jobs just before the COMMIT, in tenant order, so that units of work
// that change several tenants' numbers (the scheduler's, a node's heartbeat) always lock those
// rows in the same order and cannot deadlock on them.
using PendingDeltas = std::map<int64_t, int64_t>;

// `n` fresh ids of `table`'s id sequence, increasing: rows written by one multi-row INSERT then
// get the ids of their order (the order of RETURNING is not promised).
common::Result<std::vector<int64_t>> NextIds(PgTx& tx, const std::string& table, size_t n);
// Rows for a multi-row INSERT ... SELECT FROM jsonb_to_recordset($1): one parameter, however
// many rows, and JSON's own quoting of their text.
Param JsonRows(const nlohmann::json& rows);

// The statement PgJobStore::List runs: $1 tenant id, $2 state, $3 ids below, $4 limit, $5 name
// substring, each optional but the limit. Exposed so that its plan can be examined
// (EXPLAIN in list_bench and in the stores' pg test).
const std::string& JobListSql();

class PgJobStore : public service::JobStore {
 public:
  PgJobStore(PgTx& tx, PendingDeltas& pending) : tx_(tx), pending_(pending) {}
  common::Result<int64_t> Insert(const service::NewJob& job) override;
  common::Result<std::vector<int64_t>> InsertMany(
      const std::vector<service::NewJob>& jobs) override;
  common::Result<std::optional<service::JobRecord>> Get(int64_t id,
                                                        std::optional<int64_t> tenant_id,
                                                        bool for_update) override;
  common::Result<std::optional<service::JobRecord>> GetByIdempotencyKey(
      int64_t tenant_id, const std::string& key) override;
  common::Result<std::vector<service::JobRecord>> List(const service::JobQuery& q) override;
  common::Result<std::vector<service::JobRecord>> GetMany(const std::vector<int64_t>& ids,
                                                          bool for_update) override;
  common::Result<std::vector<service::JobRecord>> ListInStates(
      const std::vector<api::JobState>& states, bool for_update) override;
  common::Result<std::vector<service::JobVersion>> PendingVersions() override;
  common::Status Update(const service::JobRecord& job) override;
  common::Result<std::vector<service::JobVersion>> SetWaitingReasons(
      const std::vector<std::pair<int64_t, std::string>>& reasons, int64_t now_ms) override;
  common::Result<int64_t> CountForTenant(int64_t tenant_id,
                                         const std::vector<api::JobState>& states) override;
  common::Result<int64_t> PendingCount(int64_t tenant_id) override;
  common::Result<std::map<std::pair<std::string, std::string>, int64_t>> CountByStateAndTenant()
      override;

 private:
  PgTx& tx_;
  PendingDeltas& pending_;
};

class PgAllocationStore : public service::AllocationStore {
 public:
  explicit PgAllocationStore(PgTx& tx) : tx_(tx) {}
  common::Status Insert(const service::AllocationRecord& a) override;
  common::Result<std::vector<service::AllocationRecord>> ForJob(int64_t job_id) override;
  common::Result<std::vector<service::AllocationRecord>> ForNode(int64_t node_id) override;
  common::Result<std::vector<service::AllocationRecord>> All() override;
  common::Status MarkLaunched(int64_t job_id, int64_t node_id) override;
  common::Status CountLaunchSent(int64_t job_id, int64_t node_id) override;
  common::Result<std::map<int64_t, std::vector<service::AllocationRecord>>> ForJobs(
      const std::vector<int64_t>& job_ids) override;
  common::Result<std::map<int64_t, std::vector<service::AllocationRecord>>> PlacementForJobs(
      const std::vector<int64_t>& job_ids) override;
  common::Status MarkLaunchedMany(const std::vector<int64_t>& job_ids, int64_t node_id) override;
  common::Status CountLaunchesSent(const std::vector<int64_t>& job_ids, int64_t node_id) override;
  common::Result<std::vector<service::AllocationRecord>> PlacementForJob(int64_t job_id) override;
  common::Status ReleaseForJob(int64_t job_id) override;
  common::Status DeleteForJob(int64_t job_id) override;

 private:
  common::Result<std::vector<service::AllocationRecord>> Query(const std::string& where,
                                                               const Params& params);
  PgTx& tx_;
};

class PgNodeStore : public service::NodeStore {
 public:
  explicit PgNodeStore(PgTx& tx) : tx_(tx) {}
  common::Result<int64_t> Upsert(const api::RegisterRequest& r, int64_t now_ms) override;
  common::Result<std::optional<service::NodeRecord>> Get(int64_t id) override;
  common::Result<std::optional<service::NodeRecord>> GetByName(const std::string& name) override;
  common::Status SetDraining(int64_t id, bool draining) override;
  common::Result<std::vector<service::NodeRecord>> List() override;
  common::Result<std::vector<service::NodeShape>> Shapes() override;
  common::Status Touch(int64_t id, int64_t now_ms) override;
  common::Status SetState(int64_t id, const std::string& state) override;

 private:
  PgTx& tx_;
};

class PgEventStore : public service::EventStore {
 public:
  explicit PgEventStore(PgTx& tx) : tx_(tx) {}
  common::Result<int64_t> Append(int64_t job_id, int64_t time_ms, const std::string& type,
                                 const nlohmann::json& data) override;
  common::Status AppendMany(const std::vector<service::EventRecord>& events) override;
  common::Result<int64_t> AppendStep(int64_t job_id, int64_t time_ms, int64_t step,
                                     const nlohmann::json& data, bool provisional) override;
  common::Status DropProvisionalSteps(int64_t job_id) override;
  common::Result<std::vector<service::StepSample>> SampleSteps(
      int64_t job_id, const service::StepQuery& q) override;
  common::Result<std::vector<service::EventRecord>> List(int64_t job_id, int64_t after_id,
                                                         const std::string& type,
                                                         int limit) override;
  common::Result<std::optional<service::EventRecord>> Latest(int64_t job_id,
                                                             const std::string& type) override;
  common::Result<std::map<int64_t, service::EventRecord>> LatestOfJobs(
      const std::vector<int64_t>& job_ids, const std::string& type) override;
  common::Result<std::map<int64_t, service::CheckpointRecord>> LatestCheckpoints(
      const std::vector<int64_t>& job_ids) override;
  common::Status AddCheckpoint(int64_t job_id, const service::CheckpointRecord& c,
                               int64_t time_ms) override;
  common::Result<std::optional<service::CheckpointRecord>> LatestCheckpoint(
      int64_t job_id) override;
  common::Status PutEvaluation(int64_t job_id, const service::EvaluationRecord& r) override;
  common::Result<std::vector<service::EvaluationRecord>> Evaluations(int64_t job_id) override;

 private:
  PgTx& tx_;
};

class PgLogIndex : public service::LogIndex {
 public:
  explicit PgLogIndex(PgTx& tx) : tx_(tx) {}
  common::Status Upsert(int64_t job_id, const service::LogRecord& log) override;
  common::Result<std::vector<service::LogRecord>> ForJob(int64_t job_id) override;
  common::Result<std::vector<int64_t>> FinishedWithHistory(int64_t finished_before_ms,
                                                           int limit) override;
  common::Status PruneHistory(int64_t job_id) override;

 private:
  PgTx& tx_;
};

class PgTenantStore : public service::TenantStore {
 public:
  explicit PgTenantStore(PgTx& tx) : tx_(tx) {}
  common::Status LockBootstrap() override;
  common::Result<int64_t> CountTenants() override;
  common::Result<int64_t> CreateTenant(const service::TenantRecord& t, int64_t now_ms) override;
  common::Result<std::optional<service::TenantRecord>> GetTenant(int64_t id,
                                                                 bool for_update) override;
  common::Result<std::vector<service::TenantRecord>> ListTenants(
      std::optional<int64_t> only) override;
  common::Status UpdateTenant(const service::TenantRecord& t, int64_t now_ms) override;
  common::Result<service::TenantUsageNow> UsageNow(int64_t tenant_id) override;
  common::Result<int64_t> CreateToken(const service::NewToken& t) override;
  common::Result<std::vector<service::TokenRecord>> ListTokens(
      std::optional<int64_t> tenant_id) override;
  common::Result<std::optional<service::TokenRecord>> GetToken(
      int64_t id, std::optional<int64_t> tenant_id) override;
  common::Status RevokeToken(int64_t id, int64_t now_ms) override;
  common::Status RevokeNodeTokens(int64_t node_id, int64_t now_ms) override;
  common::Result<bool> HasLiveNodeToken(int64_t node_id, int64_t now_ms) override;
  common::Result<std::optional<service::TokenMatch>> FindToken(
      const std::string& sha256_hex) override;

 private:
  PgTx& tx_;
};

class PgAuditStore : public service::AuditStore {
 public:
  explicit PgAuditStore(PgTx& tx) : tx_(tx) {}
  common::Result<int64_t> Append(const service::AuditRecord& r) override;
  common::Result<std::vector<int64_t>> AppendMany(
      const std::vector<service::AuditRecord>& rows) override;
  common::Status Amend(int64_t id, const service::AuditRecord& r) override;
  common::Result<std::vector<service::AuditRecord>> List(const service::AuditQuery& q) override;
  common::Result<int64_t> DeleteBefore(int64_t before_ms, int limit) override;

 private:
  PgTx& tx_;
};

class PgFairShareStore : public service::FairShareStore {
 public:
  explicit PgFairShareStore(PgTx& tx) : tx_(tx) {}
  common::Result<service::FairShareState> Load() override;
  common::Status Save(const service::FairShareState& state) override;
  common::Status AddDailyUsage(const std::vector<service::DailyUsage>& rows) override;
  common::Result<std::vector<service::DailyUsage>> ListDailyUsage(
      std::optional<int64_t> tenant_id, const std::string& from_day,
      const std::string& to_day) override;
  common::Result<int64_t> DeleteDailyUsageBefore(const std::string& day, int limit) override;

 private:
  PgTx& tx_;
};

class PgCheckpointIndex : public service::CheckpointIndex {
 public:
  explicit PgCheckpointIndex(PgTx& tx) : tx_(tx) {}
  common::Result<int64_t> InsertUpload(const service::CheckpointBlob& c, int64_t now_ms) override;
  common::Result<std::optional<service::CheckpointBlob>> Get(int64_t id, bool for_update) override;
  common::Status SetReceived(int64_t id, int64_t received_bytes, int64_t now_ms) override;
  common::Status MarkReady(int64_t id, int64_t now_ms) override;
  common::Status Delete(int64_t id) override;
  common::Result<std::vector<service::CheckpointBlob>> ListReady(int64_t job_id) override;
  common::Result<std::optional<service::CheckpointBlob>> LatestReady(int64_t job_id) override;
  common::Result<int64_t> CountForJob(int64_t job_id) override;
  common::Result<int64_t> BytesForTenant(int64_t tenant_id) override;
  common::Result<std::vector<service::CheckpointBlob>> StaleUploads(int64_t before_ms,
                                                                    int limit) override;

 private:
  PgTx& tx_;
};

class PgDatasetStore : public service::DatasetStore {
 public:
  explicit PgDatasetStore(PgTx& tx) : tx_(tx) {}
  common::Result<service::DatasetRecord> Insert(const service::DatasetRecord& d,
                                                int64_t now_ms) override;
  common::Result<std::optional<service::DatasetRecord>> Get(int64_t id,
                                                            std::optional<int64_t> tenant_id,
                                                            bool for_update) override;
  common::Result<std::optional<service::DatasetRecord>> GetByJob(int64_t job_id,
                                                                 bool for_update) override;
  common::Result<std::optional<service::DatasetRecord>> Find(int64_t tenant_id,
                                                             const std::string& name,
                                                             std::optional<int> version) override;
  common::Result<std::vector<service::DatasetRecord>> List(const service::DatasetQuery& q) override;
  common::Status Update(const service::DatasetRecord& d, int64_t now_ms) override;
  common::Status BindJob(int64_t job_id, int64_t dataset_id) override;
  common::Result<std::optional<service::DatasetRecord>> ForJob(int64_t job_id) override;
  common::Result<std::vector<service::DatasetRecord>> AllForJob(int64_t job_id) override;
  common::Result<std::vector<int64_t>> LiveJobsReading(int64_t dataset_id) override;
  common::Result<int64_t> BytesForTenant(int64_t tenant_id, int64_t except_id) override;
  common::Result<int64_t> CountUploading(int64_t tenant_id) override;
  common::Result<std::vector<service::DatasetRecord>> StaleUploads(int64_t before_ms,
                                                                   int limit) override;

 private:
  PgTx& tx_;
};

// The statement that begins a leadership (service/leader_fence.h): run in a unit of work by
// PgLeaderFence::Advance, and by the leader lock on its own session right after it took the lock.
inline constexpr char kAdvanceLeaderEpoch[] =
    "UPDATE scheduler_leader SET epoch = epoch + 1, holder = $1, acquired_at = now() "
    "WHERE id = 1 RETURNING epoch";

class PgLeaderFence : public service::LeaderFence {
 public:
  explicit PgLeaderFence(PgTx& tx) : tx_(tx) {}
  common::Result<int64_t> Advance(const std::string& holder) override;
  common::Status Hold(int64_t epoch) override;

 private:
  PgTx& tx_;
};

class PgForecastStore : public service::ForecastStore {
 public:
  explicit PgForecastStore(PgTx& tx) : tx_(tx) {}
  common::Status Put(const std::vector<service::ForecastRecord>& rows) override;
  common::Result<std::map<int64_t, service::ForecastRecord>> ForJobs(
      const std::vector<int64_t>& job_ids) override;
  common::Result<std::vector<service::ForecastOutcome>> Due(int limit) override;
  common::Status Judge(const std::vector<service::ForecastRecord>& rows) override;

 private:
  PgTx& tx_;
};

class PgPipelineStore : public service::PipelineStore {
 public:
  explicit PgPipelineStore(PgTx& tx) : tx_(tx) {}
  common::Result<int64_t> Insert(const service::PipelineRecord& p) override;
  common::Result<std::optional<service::PipelineRecord>> Get(int64_t id,
                                                             std::optional<int64_t> tenant_id,
                                                             bool for_update) override;
  common::Result<std::vector<service::PipelineRecord>> List(
      const service::PipelineQuery& q) override;
  common::Result<std::optional<service::PipelineRecord>> GetByJob(int64_t tenant_id,
                                                                  int64_t job_id) override;
  common::Status Update(const service::PipelineRecord& p, int64_t now_ms) override;
  common::Result<std::vector<int64_t>> Active(int limit) override;

 private:
  PgTx& tx_;
};

class PgUnitOfWork : public service::UnitOfWork {
 public:
  explicit PgUnitOfWork(std::unique_ptr<PgTx> tx)
      : tx_(std::move(tx)),
        jobs_(*tx_, pending_),
        allocations_(*tx_),
        nodes_(*tx_),
        events_(*tx_),
        logs_(*tx_),
        tenants_(*tx_),
        audit_(*tx_),
        fair_share_(*tx_),
        checkpoints_(*tx_),
        datasets_(*tx_),
        leader_(*tx_),
        forecasts_(*tx_),
        pipelines_(*tx_) {}
  service::JobStore& jobs() override { return jobs_; }
  service::AllocationStore& allocations() override { return allocations_; }
  service::NodeStore& nodes() override { return nodes_; }
  service::EventStore& events() override { return events_; }
  service::LogIndex& logs() override { return logs_; }
  service::TenantStore& tenants() override { return tenants_; }
  service::AuditStore& audit() override { return audit_; }
  service::FairShareStore& fair_share() override { return fair_share_; }
  service::CheckpointIndex& checkpoints() override { return checkpoints_; }
  service::DatasetStore& datasets() override { return datasets_; }
  service::LeaderFence& leader() override { return leader_; }
  service::ForecastStore& forecasts() override { return forecasts_; }
  service::PipelineStore& pipelines() override { return pipelines_; }
  common::Status Commit() override;

 private:
  std::unique_ptr<PgTx> tx_;
  PendingDeltas pending_;  // before jobs_, which holds a reference to it
  PgJobStore jobs_;
  PgAllocationStore allocations_;
  PgNodeStore nodes_;
  PgEventStore events_;
  PgLogIndex logs_;
  PgTenantStore tenants_;
  PgAuditStore audit_;
  PgFairShareStore fair_share_;
  PgCheckpointIndex checkpoints_;
  PgDatasetStore datasets_;
  PgLeaderFence leader_;
  PgForecastStore forecasts_;
  PgPipelineStore pipelines_;
};

class PgDatabase : public service::Database {
 public:
  explicit PgDatabase(PgPool& pool) : pool_(pool) {}
  common::Result<std::unique_ptr<service::UnitOfWork>> Begin() override;

 private:
  PgPool& pool_;
};

// Parses a jsonb column; a value the server wrote itself, so failure is a programming error.
nlohmann::json ParseJsonColumn(const std::string& text);

}  // namespace controlplane::db
