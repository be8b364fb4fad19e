// Pipelines (service/pipeline_store.h; table of migration 0021): read always joined with the
// tenant's name; every tenant-owned read takes an optional tenant filter, like the job store.
#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::PipelineRecord;

namespace {

constexpr char kSelectPipeline[] =
    "SELECT p.id, p.tenant_id, t.name AS tenant, p.token_id, p.name, p.state, p.reason,"
    " p.spec::text AS spec, p.steps::text AS steps, p.key,"
    " " EMBODY_SQL_MS("p.created_at") " AS created_ms,"
    " " EMBODY_SQL_MS("p.updated_at") " AS updated_ms,"
    " " EMBODY_SQL_MS("p.finished_at") " AS finished_ms"
    " FROM pipelines p JOIN tenants t ON t.id = p.tenant_id ";

constexpr char kInsertPipeline[] =
    "INSERT INTO pipelines (tenant_id, token_id, name, state, reason, spec, steps, key,"
    " created_at, updated_at)"
    " VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, " EMBODY_SQL_TS("$9") ", "
    EMBODY_SQL_TS("$9") ") RETURNING id";

constexpr char kUpdatePipeline[] =
    "UPDATE pipelines SET state = $2, reason = $3, steps = $4::jsonb,"
    " finished_at = " EMBODY_SQL_TS("$5") ", updated_at = " EMBODY_SQL_TS("$6")
    " WHERE id = $1";

constexpr char kActive[] =
    "SELECT id FROM pipelines WHERE state IN ('running', 'cancelling') ORDER BY id LIMIT $1";

std::vector<PipelineRecord> ToPipelines(const PgRows& r) {
  std::vector<PipelineRecord> out;
  out.reserve(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    PipelineRecord p;
    p.id = r.Int(i, "id");
    p.tenant_id = r.Int(i, "tenant_id");
    p.tenant = r.Str(i, "tenant");
    p.token_id = r.Int(i, "token_id");
    p.name = r.Str(i, "name");
    p.state = r.Str(i, "state");
    p.reason = r.Str(i, "reason");
    p.spec = ParseJsonColumn(r.Str(i, "spec"));
    p.steps = service::StepsFromJson(ParseJsonColumn(r.Str(i, "steps")));
    p.key = r.Str(i, "key");
    p.created_ms = r.Int(i, "created_ms");
    p.updated_ms = r.Int(i, "updated_ms");
    p.finished_ms = r.OptInt(i, "finished_ms");
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Result<int64_t> PgPipelineStore::Insert(const PipelineRecord& p) {
  auto r = tx_.Exec(kInsertPipeline,
                    {P(p.tenant_id), P(p.token_id), P(p.name), P(p.state), P(p.reason),
                     P(p.spec.dump()), P(service::StepsToJson(p.steps).dump()), P(p.key),
                     P(p.created_ms)});
  if (!r.ok()) return r.status();
  return r->Int(0, "id");
}

Result<std::optional<PipelineRecord>> PgPipelineStore::Get(int64_t id,
                                                           std::optional<int64_t> tenant_id,
                                                           bool for_update) {
  std::string sql = std::string(kSelectPipeline) +
                    "WHERE p.id = $1 AND ($2::bigint IS NULL OR p.tenant_id = $2)";
  if (for_update) sql += " FOR UPDATE OF p";
  auto r = tx_.Exec(sql, {P(id), tenant_id ? P(*tenant_id) : std::nullopt});
  if (!r.ok()) return r.status();
  auto all = ToPipelines(*r);
  if (all.empty()) return std::optional<PipelineRecord>();
  return std::optional<PipelineRecord>(std::move(all[0]));
}

Result<std::optional<PipelineRecord>> PgPipelineStore::GetByJob(int64_t tenant_id,
                                                                int64_t job_id) {
  auto r = tx_.Exec(std::string(kSelectPipeline) +
                        "WHERE p.tenant_id = $1 AND p.steps @> jsonb_build_array("
                        "jsonb_build_object('jobs', jsonb_build_array($2::bigint))) LIMIT 1",
                    {P(tenant_id), P(job_id)});
  if (!r.ok()) return r.status();
  auto all = ToPipelines(*r);
  if (all.empty()) return std::optional<PipelineRecord>();
  return std::optional<PipelineRecord>(std::move(all[0]));
}

Result<std::vector<PipelineRecord>> PgPipelineStore::List(const service::PipelineQuery& q) {
  std::string sql = std::string(kSelectPipeline) +
                    "WHERE ($1::bigint IS NULL OR p.tenant_id = $1)"
                    " AND ($2::bigint IS NULL OR p.id < $2) ORDER BY p.id DESC LIMIT $3";
  auto r = tx_.Exec(sql, {q.tenant_id ? P(*q.tenant_id) : std::nullopt,
                          q.before_id ? P(*q.before_id) : std::nullopt, P(q.limit)});
  if (!r.ok()) return r.status();
  return ToPipelines(*r);
}

Status PgPipelineStore::Update(const PipelineRecord& p, int64_t now_ms) {
  auto r = tx_.Exec(kUpdatePipeline,
                    {P(p.id), P(p.state), P(p.reason), P(service::StepsToJson(p.steps).dump()),
                     p.finished_ms ? P(*p.finished_ms) : std::nullopt, P(now_ms)});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<int64_t>> PgPipelineStore::Active(int limit) {
  auto r = tx_.Exec(kActive, {P(limit)});
  if (!r.ok()) return r.status();
  std::vector<int64_t> ids;
  for (size_t i = 0; i < r->size(); ++i) ids.push_back(r->Int(i, "id"));
  return ids;
}

}  // namespace controlplane::db
