// Jobs: insert, read (always joined with the tenant's name), list with keyset pagination, and
// update of the mutable columns. Every tenant-owned read takes an optional tenant filter.
#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::JobRecord;

namespace {

constexpr char kJobColumns[] =
    "SELECT j.id, j.tenant_id, COALESCE(j.token_id, 0) AS token_id,"
    " COALESCE(j.request_sha256, '') AS request_sha256, t.name AS tenant, j.name, j.kind, j.state, j.reason, j.priority,"
    " j.spec::text AS spec, j.attempt, j.exit_code,"
    " " EMBODY_SQL_MS("j.created_at") " AS created_ms,"
    " " EMBODY_SQL_MS("j.updated_at") " AS updated_ms,"
    " " EMBODY_SQL_MS("j.started_at") " AS started_ms,"
    " " EMBODY_SQL_MS("j.finished_at") " AS finished_ms";

// With the row's version: its xmin, the transaction that wrote it last (every UPDATE writes a new
// row version; a lock does not).
const std::string kSelectJob = std::string(kJobColumns) +
                               ", j.xmin::text::bigint AS version"
                               " FROM jobs j JOIN tenants t ON t.id = j.tenant_id ";

// A page of jobs, newest first. The page is taken from jobs alone and joined with the tenants'
// names afterwards: joined first, the planner may read every matching job of each tenant
// through (tenant_id, state, id) and sort them all, where (state, id) or the primary key in
// order stops after the page.
const std::string kListJobs =
    std::string(kJobColumns) +
    " FROM (SELECT * FROM jobs"
    "  WHERE ($1::bigint IS NULL OR tenant_id = $1)"
    "  AND ($2::text IS NULL OR state = $2)"
    "  AND ($3::bigint IS NULL OR id < $3)"
    "  AND ($5::text IS NULL OR strpos(lower(name), lower($5)) > 0)"
    "  ORDER BY id DESC LIMIT $4) j"
    " JOIN tenants t ON t.id = j.tenant_id ORDER BY j.id DESC";

constexpr char kInsertJob[] =
    "INSERT INTO jobs (tenant_id, name, kind, state, priority, spec, idempotency_key,"
    " created_at, updated_at, token_id, request_sha256)"
    " VALUES ($1, $2, $3, 'PENDING', $4, $5::jsonb, $6, " EMBODY_SQL_TS("$7") ", "
    EMBODY_SQL_TS("$7") ", $8, $9)"
    " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id";

// Returns the state the job had, for the tenant's pending count: read under the row's lock, so
// it is the state this update replaces even when another transaction changed it meanwhile.
constexpr char kUpdateJob[] =
    "WITH old AS (SELECT id, tenant_id, state FROM jobs WHERE id = $1 FOR UPDATE)"
    " UPDATE jobs j SET state = $2, reason = $3, attempt = $4, exit_code = $5,"
    " updated_at = " EMBODY_SQL_TS("$6") ", started_at = " EMBODY_SQL_TS("$7") ","
    " finished_at = " EMBODY_SQL_TS("$8") " FROM old WHERE j.id = old.id"
    " RETURNING old.tenant_id, old.state AS old_state";

// The rows of InsertMany as jsonb_to_recordset gives them: ids taken beforehand (NextIds).
constexpr char kInsertJobs[] =
    "INSERT INTO jobs (id, tenant_id, name, kind, state, priority, spec, idempotency_key,"
    " created_at, updated_at, token_id, request_sha256)"
    " SELECT x.id, x.tenant_id, x.name, x.kind, 'PENDING', x.priority, x.spec, x.idempotency_key,"
    " " EMBODY_SQL_TS("x.now_ms") ", " EMBODY_SQL_TS("x.now_ms") ", x.token_id, x.request_sha256"
    " FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, tenant_id bigint, name text, kind text,"
    " priority int, spec jsonb, idempotency_key text, now_ms bigint, token_id bigint,"
    " request_sha256 text)"
    " ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id";

constexpr char kAddPending[] =
    "INSERT INTO tenant_pending_jobs (tenant_id, jobs) VALUES ($1, $2)"
    " ON CONFLICT (tenant_id) DO UPDATE SET jobs = tenant_pending_jobs.jobs + EXCLUDED.jobs";

// with_version: the rows carry `version` (kSelectJob's do, a page of the list does not).
std::vector<JobRecord> ToJobs(const PgRows& r, bool with_version = true) {
  std::vector<JobRecord> out;
  out.reserve(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    JobRecord j;
    j.id = r.Int(i, "id");
    j.tenant_id = r.Int(i, "tenant_id");
    j.token_id = r.Int(i, "token_id");
    j.request_sha256 = r.Str(i, "request_sha256");
    j.tenant = r.Str(i, "tenant");
    j.name = r.Str(i, "name");
    j.kind = r.Str(i, "kind");
    j.state = api::ParseJobState(r.Str(i, "state")).value_or(api::JobState::kFailed);
    j.reason = r.Str(i, "reason");
    j.priority = static_cast<int>(r.Int(i, "priority"));
    j.spec = ParseJsonColumn(r.Str(i, "spec"));
    j.attempt = static_cast<int>(r.Int(i, "attempt"));
    if (auto e = r.OptInt(i, "exit_code")) j.exit_code = static_cast<int>(*e);
    j.created_ms = r.Int(i, "created_ms");
    j.updated_ms = r.Int(i, "updated_ms");
    j.started_ms = r.OptInt(i, "started_ms");
    j.finished_ms = r.OptInt(i, "finished_ms");
    if (with_version) j.version = r.Int(i, "version");
    out.push_back(std::move(j));
  }
  return out;
}

Param OptMs(const std::optional<int64_t>& ms) { return ms ? P(*ms) : std::nullopt; }

// Rows of (id, version).
std::vector<service::JobVersion> VersionsOf(const PgRows& r) {
  std::vector<service::JobVersion> out;
  out.reserve(r.size());
  for (size_t i = 0; i < r.size(); ++i) out.push_back({r.Int(i, "id"), r.Int(i, "version")});
  return out;
}

}  // namespace

nlohmann::json ParseJsonColumn(const std::string& text) {
  return nlohmann::json::parse(text.empty() ? "null" : text);
}

Result<int64_t> PgJobStore::Insert(const service::NewJob& job) {
  Param key = job.idempotency_key.empty() ? std::nullopt : P(job.idempotency_key);
  auto r = tx_.Exec(kInsertJob, {P(job.tenant_id), P(job.name), P(job.kind), P(job.priority),
                                 P(job.spec.dump()), key, P(job.now_ms),
                                 job.token_id ? P(job.token_id) : std::nullopt,
                                 job.request_sha256.empty() ? std::nullopt
                                                            : P(job.request_sha256)});
  if (!r.ok()) return r.status();
  if (r->empty()) return Status(common::Code::kAlreadyExists, "idempotency key already used");
  pending_[job.tenant_id] += 1;  // inserted PENDING
  return r->Int(0, "id");
}

Result<std::vector<int64_t>> NextIds(PgTx& tx, const std::string& table, size_t n) {
  auto r = tx.Exec("SELECT nextval(pg_get_serial_sequence($1, 'id')) AS id"
                   " FROM generate_series(1, $2::int)",
                   {P(table), P(static_cast<int64_t>(n))});
  if (!r.ok()) return r.status();
  std::vector<int64_t> ids;
  for (size_t i = 0; i < r->size(); ++i) ids.push_back(r->Int(i, "id"));
  std::sort(ids.begin(), ids.end());
  return ids;
}

Param JsonRows(const nlohmann::json& rows) {
  return P(rows.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<std::vector<int64_t>> PgJobStore::InsertMany(const std::vector<service::NewJob>& jobs) {
  if (jobs.empty()) return std::vector<int64_t>();
  if (jobs.size() == 1) {
    // One statement instead of two (no ids to take first): a lone submission's batch.
    auto id = Insert(jobs[0]);
    if (!id.ok()) return id.status();
    return std::vector<int64_t>{*id};
  }
  auto ids = NextIds(tx_, "jobs", jobs.size());
  if (!ids.ok()) return ids.status();
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const service::NewJob& j = jobs[i];
    auto opt = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
    rows.push_back({{"id", (*ids)[i]},
                    {"tenant_id", j.tenant_id},
                    {"name", j.name},
                    {"kind", j.kind},
                    {"priority", j.priority},
                    {"spec", j.spec},
                    {"idempotency_key", opt(j.idempotency_key)},
                    {"now_ms", j.now_ms},
                    {"token_id", j.token_id ? nlohmann::json(j.token_id) : nlohmann::json()},
                    {"request_sha256", opt(j.request_sha256)}});
  }
  auto r = tx_.Exec(kInsertJobs, {JsonRows(rows)});
  if (!r.ok()) return r.status();
  if (r->size() != jobs.size()) {
    return Status(common::Code::kAlreadyExists, "idempotency key already used");
  }
  for (const service::NewJob& j : jobs) pending_[j.tenant_id] += 1;  // inserted PENDING
  return std::move(*ids);
}

Result<std::optional<JobRecord>> PgJobStore::Get(int64_t id, std::optional<int64_t> tenant_id,
                                                 bool for_update) {
  std::string sql = std::string(kSelectJob) + "WHERE j.id = $1 AND ($2::bigint IS NULL OR j.tenant_id = $2)";
  if (for_update) sql += " FOR UPDATE OF j";
  auto r = tx_.Exec(sql, {P(id), tenant_id ? P(*tenant_id) : std::nullopt});
  if (!r.ok()) return r.status();
  auto jobs = ToJobs(*r);
  if (jobs.empty()) return std::optional<JobRecord>();
  return std::optional<JobRecord>(std::move(jobs[0]));
}

Result<std::vector<JobRecord>> PgJobStore::GetMany(const std::vector<int64_t>& ids,
                                                   bool for_update) {
  if (ids.empty()) return std::vector<JobRecord>();
  // ORDER BY id: rows are locked in the order they are read, so two heartbeats (or a heartbeat
  // and the scheduler, which also locks by id) take their locks in one order.
  std::string sql = std::string(kSelectJob) + "WHERE j.id = ANY($1::bigint[]) ORDER BY j.id";
  if (for_update) sql += " FOR UPDATE OF j";
  auto r = tx_.Exec(sql, {IdArray(ids)});
  if (!r.ok()) return r.status();
  return ToJobs(*r);
}

Result<std::optional<JobRecord>> PgJobStore::GetByIdempotencyKey(int64_t tenant_id,
                                                                 const std::string& key) {
  auto r = tx_.Exec(std::string(kSelectJob) + "WHERE j.tenant_id = $1 AND j.idempotency_key = $2",
                    {P(tenant_id), P(key)});
  if (!r.ok()) return r.status();
  auto jobs = ToJobs(*r);
  if (jobs.empty()) return std::optional<JobRecord>();
  return std::optional<JobRecord>(std::move(jobs[0]));
}

const std::string& JobListSql() { return kListJobs; }

Result<std::vector<JobRecord>> PgJobStore::List(const service::JobQuery& q) {
  auto r = tx_.Exec(JobListSql(),
                    {q.tenant_id ? P(*q.tenant_id) : std::nullopt,
                     q.state ? P(api::JobStateName(*q.state)) : std::nullopt,
                     q.before_id ? P(*q.before_id) : std::nullopt, P(q.limit),
                     q.name_contains.empty() ? std::nullopt : P(q.name_contains)});
  if (!r.ok()) return r.status();
  return ToJobs(*r, /*with_version=*/false);
}

Result<std::vector<JobRecord>> PgJobStore::ListInStates(const std::vector<api::JobState>& states,
                                                        bool for_update) {
  std::string list = "{";
  for (size_t i = 0; i < states.size(); ++i) {
    if (i) list += ",";
    list += api::JobStateName(states[i]);
  }
  list += "}";
  auto r = tx_.Exec(std::string(kSelectJob) +
                        "WHERE j.state = ANY($1::text[]) ORDER BY j.id" +
                        (for_update ? " FOR UPDATE OF j" : ""),
                    {P(list)});
  if (!r.ok()) return r.status();
  return ToJobs(*r);
}

Result<std::vector<service::JobVersion>> PgJobStore::PendingVersions() {
  auto r = tx_.Exec(
      "SELECT id, xmin::text::bigint AS version FROM jobs WHERE state = 'PENDING' ORDER BY id");
  if (!r.ok()) return r.status();
  return VersionsOf(*r);
}

Result<std::vector<service::JobVersion>> PgJobStore::SetWaitingReasons(
    const std::vector<std::pair<int64_t, std::string>>& reasons, int64_t now_ms) {
  if (reasons.empty()) return std::vector<service::JobVersion>();
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [id, reason] : reasons) rows.push_back({{"id", id}, {"reason", reason}});
  auto r = tx_.Exec(
      "UPDATE jobs j SET reason = x.reason, updated_at = " EMBODY_SQL_TS("$2")
      " FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, reason text)"
      " WHERE j.id = x.id AND j.state = 'PENDING'"
      " RETURNING j.id, j.xmin::text::bigint AS version",
      {JsonRows(rows), P(now_ms)});
  if (!r.ok()) return r.status();
  return VersionsOf(*r);
}

Status PgJobStore::Update(const JobRecord& j) {
  auto r = tx_.Exec(kUpdateJob, {P(j.id), P(api::JobStateName(j.state)), P(j.reason),
                                 P(j.attempt), j.exit_code ? P(*j.exit_code) : std::nullopt,
                                 P(j.updated_ms), OptMs(j.started_ms), OptMs(j.finished_ms)});
  if (!r.ok()) return r.status();
  if (!r->empty()) {
    const bool was = r->Str(0, "old_state") == api::JobStateName(api::JobState::kPending);
    const bool is = j.state == api::JobState::kPending;
    if (was != is) pending_[r->Int(0, "tenant_id")] += is ? 1 : -1;
  }
  return Status::Ok();
}

Result<int64_t> PgJobStore::PendingCount(int64_t tenant_id) {
  auto r = tx_.Exec("SELECT jobs FROM tenant_pending_jobs WHERE tenant_id = $1", {P(tenant_id)});
  if (!r.ok()) return r.status();
  auto own = pending_.find(tenant_id);  // this unit of work's changes, not yet written
  return (r->empty() ? 0 : r->Int(0, "jobs")) + (own == pending_.end() ? 0 : own->second);
}

Result<int64_t> PgJobStore::CountForTenant(int64_t tenant_id,
                                           const std::vector<api::JobState>& states) {
  std::string list = "{";
  for (size_t i = 0; i < states.size(); ++i) {
    list += (i ? "," : "") + std::string(api::JobStateName(states[i]));
  }
  list += "}";
  auto r = tx_.Exec("SELECT count(*) AS n FROM jobs WHERE tenant_id = $1 AND state = ANY($2::text[])",
                    {P(tenant_id), P(list)});
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

Result<std::map<std::pair<std::string, std::string>, int64_t>>
PgJobStore::CountByStateAndTenant() {
  // Grouped on tenant_id first and joined afterwards: the join then touches one row per group.
  auto r = tx_.Exec("SELECT c.state, t.name AS tenant, c.n FROM"
                    " (SELECT state, tenant_id, count(*) AS n FROM jobs"
                    "  GROUP BY state, tenant_id) c"
                    " JOIN tenants t ON t.id = c.tenant_id");
  if (!r.ok()) return r.status();
  std::map<std::pair<std::string, std::string>, int64_t> out;
  for (size_t i = 0; i < r->size(); ++i) {
    out[{r->Str(i, "state"), r->Str(i, "tenant")}] = r->Int(i, "n");
  }
  return out;
}

Status PgUnitOfWork::Commit() {
  for (const auto& [tenant_id, delta] : pending_) {  // in tenant order: see PendingDeltas
    if (delta == 0) continue;
    auto r = tx_->Exec(kAddPending, {P(tenant_id), P(delta)});
    if (!r.ok()) return r.status();
  }
  pending_.clear();
  return tx_->Commit();
}

Result<std::unique_ptr<service::UnitOfWork>> PgDatabase::Begin() {
  auto tx = PgTx::Begin(pool_);
  if (!tx.ok()) return tx.status();
  return std::unique_ptr<service::UnitOfWork>(new PgUnitOfWork(std::move(tx.value())));
}

}  // namespace controlplane::db
