// Tenants (weight, quotas, version) and their bearer tokens, stored as SHA-256 digests only.
#include <cmath>
#include <cstdio>

#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::TenantRecord;
using service::TokenRecord;

namespace {

constexpr char kSelectTenant[] =
    "SELECT id, name, weight::text AS weight, quota_slots, quota_running_jobs,"
    " quota_pending_jobs, quota_nodes_per_job, quota_max_priority, quota_storage_bytes, version,"
    " " EMBODY_SQL_MS("created_at") " AS created_ms, " EMBODY_SQL_MS("updated_at") " AS updated_ms"
    " FROM tenants ";

constexpr char kInsertTenant[] =
    "INSERT INTO tenants (name, weight, quota_slots, quota_running_jobs, quota_pending_jobs,"
    " quota_nodes_per_job, quota_max_priority, quota_storage_bytes, created_at, updated_at)"
    " VALUES ($1, $2::double precision, $3, $4, $5, $6, $8, $9, " EMBODY_SQL_TS("$7") ", "
    EMBODY_SQL_TS("$7") ") RETURNING id";

constexpr char kUpdateTenant[] =
    "UPDATE tenants SET name = $2, weight = $3::double precision, quota_slots = $4,"
    " quota_running_jobs = $5, quota_pending_jobs = $6, quota_nodes_per_job = $7,"
    " quota_max_priority = $9, quota_storage_bytes = $10, version = version + 1,"
    " updated_at = " EMBODY_SQL_TS("$8")
    " WHERE id = $1";

// Slots held by unreleased allocations, and jobs by phase, of one tenant.
constexpr char kUsageNow[] =
    "SELECT"
    " (SELECT COALESCE(sum(a.slots), 0) FROM job_allocations a JOIN jobs j ON j.id = a.job_id"
    "   WHERE j.tenant_id = $1 AND NOT a.released) AS slots,"
    " (SELECT count(*) FROM jobs WHERE tenant_id = $1"
    "   AND state IN ('SCHEDULED', 'RUNNING', 'CANCELLING', 'RESTARTING')) AS running,"
    // Kept by the job store (job_store.cc), the same number admission checks the quota with.
    " COALESCE((SELECT jobs FROM tenant_pending_jobs WHERE tenant_id = $1), 0) AS pending";

constexpr char kSelectToken[] =
    "SELECT k.id, k.hash, k.tenant_id, t.name AS tenant, k.role, k.name, COALESCE(k.node_id, 0) AS node_id,"
    " COALESCE(k.created_by, 0) AS created_by,"
    " " EMBODY_SQL_MS("k.created_at") " AS created_ms,"
    " " EMBODY_SQL_MS("k.expires_at") " AS expires_ms,"
    " " EMBODY_SQL_MS("k.revoked_at") " AS revoked_ms"
    " FROM tokens k JOIN tenants t ON t.id = k.tenant_id ";

Param OptP(const std::optional<int>& v) { return v ? P(*v) : std::nullopt; }
Param OptP(const std::optional<int64_t>& v) { return v ? P(*v) : std::nullopt; }

Param DoubleP(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return std::string(buf);
}

std::optional<int> OptInt32(const PgRows& r, size_t i, const char* col) {
  auto v = r.OptInt(i, col);
  return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}

std::vector<TenantRecord> ToTenants(const PgRows& r) {
  std::vector<TenantRecord> out;
  for (size_t i = 0; i < r.size(); ++i) {
    TenantRecord t;
    t.id = r.Int(i, "id");
    t.name = r.Str(i, "name");
    t.weight = std::strtod(r.Str(i, "weight").c_str(), nullptr);
    t.quota.slots = OptInt32(r, i, "quota_slots");
    t.quota.running_jobs = OptInt32(r, i, "quota_running_jobs");
    t.quota.pending_jobs = OptInt32(r, i, "quota_pending_jobs");
    t.quota.nodes_per_job = OptInt32(r, i, "quota_nodes_per_job");
    t.quota.max_priority = OptInt32(r, i, "quota_max_priority");
    t.quota.storage_bytes = r.OptInt(i, "quota_storage_bytes");
    t.version = r.Int(i, "version");
    t.created_ms = r.Int(i, "created_ms");
    t.updated_ms = r.Int(i, "updated_ms");
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TokenRecord> ToTokens(const PgRows& r) {
  std::vector<TokenRecord> out;
  for (size_t i = 0; i < r.size(); ++i) {
    TokenRecord t;
    t.id = r.Int(i, "id");
    t.tenant_id = r.Int(i, "tenant_id");
    t.tenant = r.Str(i, "tenant");
    t.role = r.Str(i, "role");
    t.name = r.Str(i, "name");
    t.node_id = r.Int(i, "node_id");
    t.created_by = r.Int(i, "created_by");
    t.created_ms = r.Int(i, "created_ms");
    t.expires_ms = r.OptInt(i, "expires_ms");
    t.revoked_ms = r.OptInt(i, "revoked_ms");
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Status PgTenantStore::LockBootstrap() {
  return OkOr(tx_.Exec("SELECT pg_advisory_xact_lock(7361002)"));
}

Result<int64_t> PgTenantStore::CountTenants() {
  auto r = tx_.Exec("SELECT count(*) AS n FROM tenants");
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

Result<int64_t> PgTenantStore::CreateTenant(const TenantRecord& t, int64_t now_ms) {
  auto r = tx_.Exec(kInsertTenant, {P(t.name), DoubleP(t.weight), OptP(t.quota.slots),
                                    OptP(t.quota.running_jobs), OptP(t.quota.pending_jobs),
                                    OptP(t.quota.nodes_per_job), P(now_ms),
                                    OptP(t.quota.max_priority), OptP(t.quota.storage_bytes)});
  if (!r.ok()) {
    if (r.status().code() == common::Code::kAlreadyExists) {
      return Status(common::Code::kAlreadyExists, "tenant \"" + t.name + "\" exists", "name");
    }
    return r.status();
  }
  return r->Int(0, "id");
}

Result<std::optional<TenantRecord>> PgTenantStore::GetTenant(int64_t id, bool for_update) {
  auto r = tx_.Exec(std::string(kSelectTenant) + "WHERE id = $1" + (for_update ? " FOR UPDATE" : ""),
                    {P(id)});
  if (!r.ok()) return r.status();
  auto all = ToTenants(*r);
  if (all.empty()) return std::optional<TenantRecord>();
  return std::optional<TenantRecord>(std::move(all[0]));
}

Result<std::vector<TenantRecord>> PgTenantStore::ListTenants(std::optional<int64_t> only) {
  auto r = tx_.Exec(std::string(kSelectTenant) + "WHERE ($1::bigint IS NULL OR id = $1) ORDER BY id",
                    {only ? P(*only) : std::nullopt});
  if (!r.ok()) return r.status();
  return ToTenants(*r);
}

Status PgTenantStore::UpdateTenant(const TenantRecord& t, int64_t now_ms) {
  auto r = tx_.Exec(kUpdateTenant, {P(t.id), P(t.name), DoubleP(t.weight), OptP(t.quota.slots),
                                    OptP(t.quota.running_jobs), OptP(t.quota.pending_jobs),
                                    OptP(t.quota.nodes_per_job), P(now_ms),
                                    OptP(t.quota.max_priority), OptP(t.quota.storage_bytes)});
  if (!r.ok() && r.status().code() == common::Code::kAlreadyExists) {
    return Status(common::Code::kAlreadyExists, "tenant \"" + t.name + "\" exists", "name");
  }
  return OkOr(r);
}

Result<service::TenantUsageNow> PgTenantStore::UsageNow(int64_t tenant_id) {
  auto r = tx_.Exec(kUsageNow, {P(tenant_id)});
  if (!r.ok()) return r.status();
  return service::TenantUsageNow{r->Int(0, "slots"), r->Int(0, "running"), r->Int(0, "pending")};
}

Result<int64_t> PgTenantStore::CreateToken(const service::NewToken& t) {
  auto r = tx_.Exec(
      "INSERT INTO tokens (hash, tenant_id, role, name, expires_at, node_id, created_by, created_at)"
      " VALUES ($1, $2, $3, $4, " EMBODY_SQL_TS("$5") ", $6, $7, " EMBODY_SQL_TS("$8") ") RETURNING id",
      {P(t.sha256_hex), P(t.tenant_id), P(t.role), P(t.name),
       t.expires_ms ? P(*t.expires_ms) : std::nullopt, t.node_id ? P(t.node_id) : std::nullopt,
       t.created_by ? P(t.created_by) : std::nullopt, P(t.now_ms)});
  if (!r.ok()) return r.status();
  return r->Int(0, "id");
}

Result<std::vector<TokenRecord>> PgTenantStore::ListTokens(std::optional<int64_t> tenant_id) {
  auto r = tx_.Exec(std::string(kSelectToken) +
                        "WHERE ($1::bigint IS NULL OR k.tenant_id = $1) ORDER BY k.id",
                    {tenant_id ? P(*tenant_id) : std::nullopt});
  if (!r.ok()) return r.status();
  return ToTokens(*r);
}

Result<std::optional<TokenRecord>> PgTenantStore::GetToken(int64_t id,
                                                           std::optional<int64_t> tenant_id) {
  auto r = tx_.Exec(std::string(kSelectToken) +
                        "WHERE k.id = $1 AND ($2::bigint IS NULL OR k.tenant_id = $2)",
                    {P(id), tenant_id ? P(*tenant_id) : std::nullopt});
  if (!r.ok()) return r.status();
  auto all = ToTokens(*r);
  if (all.empty()) return std::optional<TokenRecord>();
  return std::optional<TokenRecord>(std::move(all[0]));
}

Status PgTenantStore::RevokeToken(int64_t id, int64_t now_ms) {
  return OkOr(tx_.Exec("UPDATE tokens SET revoked_at = " EMBODY_SQL_TS("$2") " WHERE id = $1"
                       " AND revoked_at IS NULL",
                       {P(id), P(now_ms)}));
}

Result<bool> PgTenantStore::HasLiveNodeToken(int64_t node_id, int64_t now_ms) {
  // tokens_live_node_idx: at most one unrevoked credential per node.
  auto r = tx_.Exec("SELECT count(*) AS n FROM tokens WHERE node_id = $1 AND revoked_at IS NULL"
                    " AND (expires_at IS NULL OR expires_at > " EMBODY_SQL_TS("$2") ")",
                    {P(node_id), P(now_ms)});
  if (!r.ok()) return r.status();
  return r->Int(0, "n") > 0;
}

Status PgTenantStore::RevokeNodeTokens(int64_t node_id, int64_t now_ms) {
  return OkOr(tx_.Exec("UPDATE tokens SET revoked_at = " EMBODY_SQL_TS("$2") " WHERE node_id = $1"
                       " AND revoked_at IS NULL",
                       {P(node_id), P(now_ms)}));
}

Result<std::optional<service::TokenMatch>> PgTenantStore::FindToken(const std::string& sha256_hex) {
  auto r = tx_.Exec(std::string(kSelectToken) + "WHERE k.hash = $1",
                    {P(sha256_hex)});
  if (!r.ok()) return r.status();
  if (r->empty()) return std::optional<service::TokenMatch>();
  TokenRecord t = ToTokens(*r)[0];
  service::TokenMatch m;
  m.principal.token_id = t.id;
  m.principal.token_name = t.name;
  m.principal.tenant_id = t.tenant_id;
  m.principal.tenant = t.tenant;
  m.principal.role = t.role;
  m.principal.node_id = t.node_id;
  m.sha256_hex = r->Str(0, "hash");
  m.expires_ms = t.expires_ms;
  m.revoked_ms = t.revoked_ms;
  return std::optional<service::TokenMatch>(std::move(m));
}

// --- audit -------------------------------------------------------------------------------------

Result<int64_t> PgAuditStore::Append(const service::AuditRecord& a) {
  auto r = tx_.Exec(
      "INSERT INTO audit_log (time, token_id, actor, role, tenant_id, target_tenant_id, method,"
      " route, path, target, status, outcome, request_id) VALUES (" EMBODY_SQL_TS("$1") ", $2, $3,"
      " $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
      {P(a.time_ms), a.token_id ? P(a.token_id) : std::nullopt, P(a.actor), P(a.role),
       a.tenant_id ? P(a.tenant_id) : std::nullopt,
       a.target_tenant_id ? P(a.target_tenant_id) : std::nullopt, P(a.method), P(a.route),
       P(a.path), P(a.target), P(a.status), P(a.outcome), P(a.request_id)});
  if (!r.ok()) return r.status();
  return r->Int(0, "id");
}

Result<std::vector<int64_t>> PgAuditStore::AppendMany(
    const std::vector<service::AuditRecord>& rows) {
  if (rows.empty()) return std::vector<int64_t>();
  if (rows.size() == 1) {  // one statement instead of two
    auto id = Append(rows[0]);
    if (!id.ok()) return id.status();
    return std::vector<int64_t>{*id};
  }
  auto ids = NextIds(tx_, "audit_log", rows.size());
  if (!ids.ok()) return ids.status();
  nlohmann::json out = nlohmann::json::array();
  auto opt = [](int64_t v) { return v ? nlohmann::json(v) : nlohmann::json(); };
  for (size_t i = 0; i < rows.size(); ++i) {
    const service::AuditRecord& a = rows[i];
    out.push_back({{"id", (*ids)[i]}, {"time_ms", a.time_ms}, {"token_id", opt(a.token_id)},
                   {"actor", a.actor}, {"role", a.role}, {"tenant_id", opt(a.tenant_id)},
                   {"target_tenant_id", opt(a.target_tenant_id)}, {"method", a.method},
                   {"route", a.route}, {"path", a.path}, {"target", a.target},
                   {"status", a.status}, {"outcome", a.outcome}, {"request_id", a.request_id}});
  }
  auto r = tx_.Exec(
      "INSERT INTO audit_log (id, time, token_id, actor, role, tenant_id, target_tenant_id, method,"
      " route, path, target, status, outcome, request_id)"
      " SELECT x.id, " EMBODY_SQL_TS("x.time_ms") ", x.token_id, x.actor, x.role, x.tenant_id,"
      " x.target_tenant_id, x.method, x.route, x.path, x.target, x.status, x.outcome, x.request_id"
      " FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, time_ms bigint, token_id bigint,"
      " actor text, role text, tenant_id bigint, target_tenant_id bigint, method text, route text,"
      " path text, target text, status int, outcome text, request_id text)",
      {JsonRows(out)});
  if (!r.ok()) return r.status();
  return std::move(*ids);
}

Status PgAuditStore::Amend(int64_t id, const service::AuditRecord& a) {
  return OkOr(
      tx_.Exec("UPDATE audit_log SET status = $2, outcome = $3, target = $4, target_tenant_id = $5"
               " WHERE id = $1",
               {P(id), P(a.status), P(a.outcome), P(a.target),
                a.target_tenant_id ? P(a.target_tenant_id) : std::nullopt}));
}

Result<int64_t> PgAuditStore::DeleteBefore(int64_t before_ms, int limit) {
  auto r = tx_.Exec(
      "WITH gone AS (DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE time < "
      EMBODY_SQL_TS("$1") " ORDER BY id LIMIT $2) RETURNING 1) SELECT count(*) AS n FROM gone",
      {P(before_ms), P(limit)});
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

Result<std::vector<service::AuditRecord>> PgAuditStore::List(const service::AuditQuery& q) {
  auto r = tx_.Exec(
      "SELECT a.id, " EMBODY_SQL_MS("a.time") " AS time_ms, COALESCE(a.token_id, 0) AS token_id,"
      " a.actor, a.role, COALESCE(a.tenant_id, 0) AS tenant_id, COALESCE(t.name, '') AS tenant,"
      " COALESCE(a.target_tenant_id, 0) AS target_tenant_id, a.method, a.route, a.path, a.target,"
      " a.status, a.outcome, a.request_id FROM audit_log a LEFT JOIN tenants t ON t.id = a.tenant_id"
      " WHERE ($1::bigint IS NULL OR (a.tenant_id = $1 AND a.role <> 'cluster-admin')"
      " OR a.target_tenant_id = $1)"
      " AND ($2::bigint IS NULL OR a.id < $2) ORDER BY a.id DESC LIMIT $3",
      {q.tenant_id ? P(*q.tenant_id) : std::nullopt, q.before_id ? P(*q.before_id) : std::nullopt,
       P(q.limit)});
  if (!r.ok()) return r.status();
  std::vector<service::AuditRecord> out;
  for (size_t i = 0; i < r->size(); ++i) {
    service::AuditRecord a;
    a.id = r->Int(i, "id");
    a.time_ms = r->Int(i, "time_ms");
    a.token_id = r->Int(i, "token_id");
    a.actor = r->Str(i, "actor");
    a.role = r->Str(i, "role");
    a.tenant_id = r->Int(i, "tenant_id");
    a.tenant = r->Str(i, "tenant");
    a.target_tenant_id = r->Int(i, "target_tenant_id");
    a.method = r->Str(i, "method");
    a.route = r->Str(i, "route");
    a.path = r->Str(i, "path");
    a.target = r->Str(i, "target");
    a.status = static_cast<int>(r->Int(i, "status"));
    a.outcome = r->Str(i, "outcome");
    a.request_id = r->Str(i, "request_id");
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace controlplane::db
