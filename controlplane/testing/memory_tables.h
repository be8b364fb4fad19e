// Inside the in-memory twin (memory_database.h): the tables as maps keyed like the PostgreSQL
// tables' primary keys, the copy-on-write wrapper that gives each unit of work its own view, the
// per-unit state every store shares (MemoryTx), and one store class per interface. Only the
// memory_*.cc files include this.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "controlplane/service/checkpoint_index.h"
#include "controlplane/service/dataset_store.h"
#include "controlplane/service/fair_share_store.h"
#include "controlplane/service/forecast_store.h"
#include "controlplane/service/leader_fence.h"
#include "controlplane/service/pipeline_store.h"
#include "controlplane/service/store.h"

namespace controlplane::testing {

// A table shared with the committed state until the unit of work first writes it; then the unit
// works on its own copy. Readers never copy.
template <typename Table>
class CowTable {
 public:
  const Table& get() const { return *table_; }
  Table& mut() {
    if (!owned_) {
      table_ = std::make_shared<Table>(*table_);
      owned_ = true;
    }
    return *table_;
  }
  // After Commit the committed state shares this copy; the next writer copies it again.
  void Share() { owned_ = false; }

 private:
  std::shared_ptr<Table> table_ = std::make_shared<Table>();
  bool owned_ = false;
};

struct TokenRow {
  service::TokenRecord token;  // `tenant` is filled on reads, from the tenants table
  std::string hash;
};

struct JobRow {
  service::JobRecord job;  // `tenant` is filled on reads
  std::optional<std::string> idempotency_key;
};

struct AllocationRow {
  service::AllocationRecord a;  // node_name and node_address are filled on reads
  bool released = false;
};

struct EventRow {
  service::EventRecord e;
  std::optional<int64_t> step;  // step events
  bool provisional = false;
};

struct CheckpointRow {
  int64_t job_id = 0;
  service::CheckpointRecord c;
  int64_t time_ms = 0;
};

// (day, tenant, token, slot type): usage_daily's primary key, in the order rows are listed.
using DailyKey = std::tuple<std::string, int64_t, int64_t, std::string>;

struct MemoryTables {
  CowTable<std::map<int64_t, service::TenantRecord>> tenants;
  CowTable<std::map<int64_t, TokenRow>> tokens;
  CowTable<std::map<int64_t, service::NodeRecord>> nodes;
  CowTable<std::map<int64_t, JobRow>> jobs;
  CowTable<std::map<std::pair<int64_t, int64_t>, AllocationRow>> allocations;  // (job, node)
  CowTable<std::map<int64_t, EventRow>> events;
  CowTable<std::map<int64_t, CheckpointRow>> checkpoints;
  CowTable<std::map<std::pair<int64_t, std::string>, service::EvaluationRecord>>
      evaluations;  // (job, task)
  CowTable<std::map<int64_t, service::CheckpointBlob>> checkpoint_blobs;
  // (job, attempt, rank)
  CowTable<std::map<std::tuple<int64_t, int, int>, service::LogRecord>> logs;
  CowTable<std::map<int64_t, service::AuditRecord>> audit;
  CowTable<std::map<std::pair<int64_t, int>, double>> fair_share;  // (tenant, slot kind)
  CowTable<std::optional<int64_t>> fair_share_clock;
  CowTable<std::map<DailyKey, double>> usage_daily;
  CowTable<std::map<int64_t, service::DatasetRecord>> datasets;  // `tenant` is filled on reads
  CowTable<std::set<std::pair<int64_t, int64_t>>> job_datasets;  // (job, dataset)
  CowTable<int64_t> leader_epoch;                                // scheduler_leader.epoch
  CowTable<std::map<int64_t, service::ForecastRecord>> forecasts;  // by job
  CowTable<std::map<int64_t, service::PipelineRecord>> pipelines;  // `tenant` is filled on reads

  void ShareAll();
};

// bigserial sequences: advanced by every insert, committed or not, so ids are never reused.
struct MemorySequences {
  int64_t tenants = 0, tokens = 0, nodes = 0, jobs = 0, events = 0, checkpoints = 0, audit = 0,
          datasets = 0, pipelines = 0;
  int64_t job_versions = 0;  // a job row's version (PostgreSQL: its xmin), new at every write
};

// What the stores of one unit of work share.
class MemoryTx {
 public:
  MemoryTx(const MemoryTables& committed, MemorySequences& sequences)
      : tables(committed), seq(sequences) {}

  // Every store call starts here: a unit that failed a statement or has ended takes no more.
  common::Status Usable() const;
  // Records a failed statement: the unit is aborted, as a PostgreSQL transaction is.
  common::Status Fail(common::Status st);
  // Text as PostgreSQL stores it (UTF-8, no NUL); anything else fails the statement.
  common::Status Text(std::string_view s);
  // A jsonb value as it reads back: strings made valid UTF-8 (as the PostgreSQL stores write
  // them), with a NUL anywhere failing the statement.
  common::Result<nlohmann::json> Jsonb(const nlohmann::json& j);
  // A foreign key that points nowhere fails the statement.
  common::Status Reference(bool exists, const char* what);

  MemoryTables tables;
  MemorySequences& seq;
  bool aborted = false;
  bool ended = false;
};

// Name of the tenant `id` (the join every tenant-owned read makes).
std::string TenantName(const MemoryTables& t, int64_t id);

class MemoryJobStore : public service::JobStore {
 public:
  explicit MemoryJobStore(MemoryTx& tx) : tx_(tx) {}
  common::Result<int64_t> Insert(const service::NewJob& job) override;
  common::Result<std::optional<service::JobRecord>> Get(int64_t id,
                                                        std::optional<int64_t> tenant_id,
                                                        bool for_update) override;
  common::Result<std::optional<service::JobRecord>> GetByIdempotencyKey(
      int64_t tenant_id, const std::string& key) override;
  common::Result<std::vector<service::JobRecord>> List(const service::JobQuery& q) override;
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
  service::JobRecord Read(const JobRow& row) const;
  MemoryTx& tx_;
};

class MemoryAllocationStore : public service::AllocationStore {
 public:
  explicit MemoryAllocationStore(MemoryTx& tx) : tx_(tx) {}
  common::Status Insert(const service::AllocationRecord& a) override;
  common::Result<std::vector<service::AllocationRecord>> ForJob(int64_t job_id) override;
  common::Result<std::vector<service::AllocationRecord>> PlacementForJob(int64_t job_id) override;
  common::Result<std::vector<service::AllocationRecord>> ForNode(int64_t node_id) override;
  common::Result<std::vector<service::AllocationRecord>> All() override;
  common::Status MarkLaunched(int64_t job_id, int64_t node_id) override;
  common::Status CountLaunchSent(int64_t job_id, int64_t node_id) override;
  common::Status ReleaseForJob(int64_t job_id) override;
  common::Status DeleteForJob(int64_t job_id) override;

 private:
  // Rows of one job (or every job: 0), live only or not, as the reads return them.
  std::vector<service::AllocationRecord> Rows(int64_t job_id, bool live_only) const;
  MemoryTx& tx_;
};

class MemoryNodeStore : public service::NodeStore {
 public:
  explicit MemoryNodeStore(MemoryTx& tx) : tx_(tx) {}
  common::Result<int64_t> Upsert(const api::RegisterRequest& r, int64_t now_ms) override;
  common::Result<std::optional<service::NodeRecord>> Get(int64_t id) override;
  common::Result<std::optional<service::NodeRecord>> GetByName(const std::string& name) override;
  common::Status SetDraining(int64_t id, bool draining) override;
  common::Result<std::vector<service::NodeRecord>> List() override;
  common::Result<std::vector<service::NodeShape>> Shapes() override;
  common::Status Touch(int64_t id, int64_t now_ms) override;
  common::Status SetState(int64_t id, const std::string& state) override;

 private:
  MemoryTx& tx_;
};

class MemoryEventStore : public service::EventStore {
 public:
  explicit MemoryEventStore(MemoryTx& tx) : tx_(tx) {}
  common::Result<int64_t> Append(int64_t job_id, int64_t time_ms, const std::string& type,
                                 const nlohmann::json& data) override;
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
  common::Status AddCheckpoint(int64_t job_id, const service::CheckpointRecord& c,
                               int64_t time_ms) override;
  common::Result<std::optional<service::CheckpointRecord>> LatestCheckpoint(
      int64_t job_id) override;
  common::Status PutEvaluation(int64_t job_id, const service::EvaluationRecord& r) override;
  common::Result<std::vector<service::EvaluationRecord>> Evaluations(int64_t job_id) override;

 private:
  common::Result<int64_t> Insert(EventRow row);
  MemoryTx& tx_;
};

class MemoryLogIndex : public service::LogIndex {
 public:
  explicit MemoryLogIndex(MemoryTx& tx) : tx_(tx) {}
  common::Status Upsert(int64_t job_id, const service::LogRecord& log) override;
  common::Result<std::vector<service::LogRecord>> ForJob(int64_t job_id) override;
  common::Result<std::vector<int64_t>> FinishedWithHistory(int64_t finished_before_ms,
                                                           int limit) override;
  common::Status PruneHistory(int64_t job_id) override;

 private:
  MemoryTx& tx_;
};

class MemoryTenantStore : public service::TenantStore {
 public:
  explicit MemoryTenantStore(MemoryTx& tx) : tx_(tx) {}
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
  common::Result<bool> HasLiveNodeToken(int64_t node_id, int64_t now_ms) override;
  common::Status RevokeNodeTokens(int64_t node_id, int64_t now_ms) override;
  common::Result<std::optional<service::TokenMatch>> FindToken(
      const std::string& sha256_hex) override;

 private:
  common::Status CheckTenantName(const std::string& name, int64_t except_id);
  service::TokenRecord Read(const TokenRow& row) const;
  MemoryTx& tx_;
};

class MemoryAuditStore : public service::AuditStore {
 public:
  explicit MemoryAuditStore(MemoryTx& tx) : tx_(tx) {}
  common::Result<int64_t> Append(const service::AuditRecord& r) override;
  common::Status Amend(int64_t id, const service::AuditRecord& r) override;
  common::Result<std::vector<service::AuditRecord>> List(const service::AuditQuery& q) override;
  common::Result<int64_t> DeleteBefore(int64_t before_ms, int limit) override;

 private:
  MemoryTx& tx_;
};

class MemoryCheckpointIndex : public service::CheckpointIndex {
 public:
  explicit MemoryCheckpointIndex(MemoryTx& tx) : tx_(tx) {}
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
  std::vector<service::CheckpointBlob> Ready(int64_t job_id) const;  // by step, then id
  MemoryTx& tx_;
};

class MemoryFairShareStore : public service::FairShareStore {
 public:
  explicit MemoryFairShareStore(MemoryTx& tx) : tx_(tx) {}
  common::Result<service::FairShareState> Load() override;
  common::Status Save(const service::FairShareState& state) override;
  common::Status AddDailyUsage(const std::vector<service::DailyUsage>& rows) override;
  common::Result<std::vector<service::DailyUsage>> ListDailyUsage(
      std::optional<int64_t> tenant_id, const std::string& from_day,
      const std::string& to_day) override;
  common::Result<int64_t> DeleteDailyUsageBefore(const std::string& day, int limit) override;

 private:
  MemoryTx& tx_;
};

// Units of work are serialised here, so holding an epoch is only checking it: no Advance can
// commit while a unit that checked it is open.
class MemoryLeaderFence : public service::LeaderFence {
 public:
  explicit MemoryLeaderFence(MemoryTx& tx) : tx_(tx) {}
  common::Result<int64_t> Advance(const std::string& holder) override;
  common::Status Hold(int64_t epoch) override;

 private:
  MemoryTx& tx_;
};

class MemoryForecastStore : public service::ForecastStore {
 public:
  explicit MemoryForecastStore(MemoryTx& tx) : tx_(tx) {}
  common::Status Put(const std::vector<service::ForecastRecord>& rows) override;
  common::Result<std::map<int64_t, service::ForecastRecord>> ForJobs(
      const std::vector<int64_t>& job_ids) override;
  common::Result<std::vector<service::ForecastOutcome>> Due(int limit) override;
  common::Status Judge(const std::vector<service::ForecastRecord>& rows) override;

 private:
  MemoryTx& tx_;
};

class MemoryPipelineStore : public service::PipelineStore {
 public:
  explicit MemoryPipelineStore(MemoryTx& tx) : tx_(tx) {}
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
  MemoryTx& tx_;
};

class MemoryDatasetStore : public service::DatasetStore {
 public:
  explicit MemoryDatasetStore(MemoryTx& tx) : tx_(tx) {}
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
  service::DatasetRecord Read(const service::DatasetRecord& row) const;
  MemoryTx& tx_;
};

}  // namespace controlplane::testing
