// The twin's database and unit of work (memory_database.h): the one mutex that serialises units,
// the copy-on-write view each unit works on, and what every statement checks first.
#include "controlplane/testing/memory_database.h"

#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;

namespace {

// Whether `s` is UTF-8 as PostgreSQL accepts it: shortest forms, no surrogates, at most
// U+10FFFF, and no NUL (which text cannot hold).
bool StorableText(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

bool JsonHasNul(const nlohmann::json& j) {
  if (j.is_string()) return j.get_ref<const std::string&>().find('\0') != std::string::npos;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key().find('\0') != std::string::npos || JsonHasNul(it.value())) return true;
    }
  }
  if (j.is_array()) {
    for (const auto& v : j) {
      if (JsonHasNul(v)) return true;
    }
  }
  return false;
}

}  // namespace

void MemoryTables::ShareAll() {
  tenants.Share();
  tokens.Share();
  nodes.Share();
  jobs.Share();
  allocations.Share();
  events.Share();
  checkpoints.Share();
  evaluations.Share();
  checkpoint_blobs.Share();
  logs.Share();
  audit.Share();
  fair_share.Share();
  fair_share_clock.Share();
  usage_daily.Share();
  datasets.Share();
  job_datasets.Share();
  leader_epoch.Share();
  forecasts.Share();
  pipelines.Share();
}

Status MemoryTx::Usable() const {
  if (ended) return common::Internal("memory database: the unit of work has ended");
  if (aborted) {
    return common::Internal(
        "memory database: current transaction is aborted, commands ignored until end of "
        "transaction block");
  }
  return Status::Ok();
}

Status MemoryTx::Fail(Status st) {
  aborted = true;
  return st;
}

Status MemoryTx::Text(std::string_view s) {
  if (StorableText(s)) return Status::Ok();
  // The message PostgreSQL's stores give (db/pg.cc): the request is at fault.
  return Fail(common::InvalidArgument("text must be valid UTF-8 without NUL characters"));
}

Result<nlohmann::json> MemoryTx::Jsonb(const nlohmann::json& j) {
  if (JsonHasNul(j)) {
    return Fail(common::InvalidArgument("text must be valid UTF-8 without NUL characters"));
  }
  // Through text and back, as jsonb does: bytes that are not UTF-8 become U+FFFD, as the
  // PostgreSQL stores serialise them.
  return nlohmann::json::parse(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Status MemoryTx::Reference(bool exists, const char* what) {
  if (exists) return Status::Ok();
  return Fail(common::Internal(std::string("memory database: foreign key violation: ") + what));
}

std::string TenantName(const MemoryTables& t, int64_t id) {
  auto it = t.tenants.get().find(id);
  return it == t.tenants.get().end() ? "" : it->second.name;
}

// One unit of work: holds the database's mutex from Begin until Commit or destruction.
class MemoryUnitOfWork : public service::UnitOfWork {
 public:
  MemoryUnitOfWork(MemoryDatabase& db, std::unique_lock<std::mutex> lock)
      : db_(db),
        lock_(std::move(lock)),
        tx_(*db.committed_, *db.sequences_),
        jobs_(tx_),
        allocations_(tx_),
        nodes_(tx_),
        events_(tx_),
        logs_(tx_),
        tenants_(tx_),
        audit_(tx_),
        fair_share_(tx_),
        checkpoints_(tx_),
        datasets_(tx_),
        leader_(tx_),
        forecasts_(tx_),
        pipelines_(tx_) {}
  ~MemoryUnitOfWork() override { End(); }

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

  Status Commit() override {
    if (tx_.ended) return common::Internal("memory database: the unit of work has ended");
    if (tx_.aborted) {
      // PostgreSQL answers COMMIT of an aborted transaction by rolling it back; saying so is
      // stricter, and a service that commits after an error has a bug worth seeing.
      End();
      return common::Internal("memory database: commit of a transaction aborted by an error");
    }
    tx_.tables.ShareAll();
    *db_.committed_ = tx_.tables;
    End();
    return Status::Ok();
  }

 private:
  void End() {
    if (tx_.ended) return;
    tx_.ended = true;
    db_.owner_.store(std::thread::id());
    lock_.unlock();
  }

  MemoryDatabase& db_;
  std::unique_lock<std::mutex> lock_;
  MemoryTx tx_;
  MemoryJobStore jobs_;
  MemoryAllocationStore allocations_;
  MemoryNodeStore nodes_;
  MemoryEventStore events_;
  MemoryLogIndex logs_;
  MemoryTenantStore tenants_;
  MemoryAuditStore audit_;
  MemoryFairShareStore fair_share_;
  MemoryCheckpointIndex checkpoints_;
  MemoryDatasetStore datasets_;
  MemoryLeaderFence leader_;
  MemoryForecastStore forecasts_;
  MemoryPipelineStore pipelines_;
};

MemoryDatabase::MemoryDatabase()
    : committed_(std::make_unique<MemoryTables>()),
      sequences_(std::make_unique<MemorySequences>()) {}

MemoryDatabase::~MemoryDatabase() = default;

Result<std::unique_ptr<service::UnitOfWork>> MemoryDatabase::Begin() {
  if (owner_.load() == std::this_thread::get_id()) {
    return common::Internal(
        "memory database: Begin() on a thread whose unit of work is still open (units are "
        "serialised; end the first before beginning another)");
  }
  std::unique_lock<std::mutex> lock(mu_);
  owner_.store(std::this_thread::get_id());
  return std::unique_ptr<service::UnitOfWork>(new MemoryUnitOfWork(*this, std::move(lock)));
}

}  // namespace controlplane::testing
