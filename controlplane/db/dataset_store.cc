// Datasets: versions per (tenant, name), read always joined with the tenant's name, and the
// job -> dataset binding of training jobs. Every tenant-owned read takes an optional tenant
// filter, like the job store.
#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::DatasetRecord;

namespace {

constexpr char kSelectDataset[] =
    "SELECT d.id, d.tenant_id, t.name AS tenant, d.token_id, d.name, d.version, d.state,"
    " d.source::text AS source, d.manifest::text AS manifest, d.episodes, d.frames, d.bytes,"
    " d.path, d.job_id, d.error, d.received_bytes,"
    " " EMBODY_SQL_MS("d.created_at") " AS created_ms,"
    " " EMBODY_SQL_MS("d.updated_at") " AS updated_ms"
    " FROM datasets d JOIN tenants t ON t.id = d.tenant_id ";

// The next version is computed in the statement; the caller holds the tenant's row lock, so two
// creations of the same name cannot both take it (the unique key would refuse the second).
constexpr char kInsertDataset[] =
    "INSERT INTO datasets (tenant_id, token_id, name, version, state, source, path,"
    " created_at, updated_at)"
    " SELECT $1, $2, $3, COALESCE(max(version), 0) + 1, $7, $4::jsonb, $5,"
    " " EMBODY_SQL_TS("$6") ", " EMBODY_SQL_TS("$6")
    " FROM datasets WHERE tenant_id = $1 AND name = $3"
    " RETURNING id, version";

constexpr char kUpdateDataset[] =
    "UPDATE datasets SET state = $2, manifest = $3::jsonb, episodes = $4, frames = $5,"
    " bytes = $6, path = $7, job_id = $8, error = $9, updated_at = " EMBODY_SQL_TS("$10")
    ", received_bytes = $11"
    " WHERE id = $1";

// An upload's declared size is in its source (api::ToJson of the ImportSource, written by the
// server, never by the client as sent).
constexpr char kBytesForTenant[] =
    "SELECT COALESCE(sum(CASE d.state"
    "   WHEN 'uploading' THEN COALESCE((d.source->'upload'->>'bytes')::bigint, 0)"
    "   WHEN 'importing' THEN"
    "     GREATEST(d.bytes, COALESCE((d.source->'upload'->>'bytes')::bigint, 0))"
    "   ELSE d.bytes END), 0)::bigint AS bytes"
    " FROM datasets d"
    " WHERE d.tenant_id = $1 AND d.state IN ('uploading', 'importing', 'ready', 'failed')"
    " AND d.id <> $2";

std::vector<DatasetRecord> ToDatasets(const PgRows& r) {
  std::vector<DatasetRecord> out;
  out.reserve(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    DatasetRecord d;
    d.id = r.Int(i, "id");
    d.tenant_id = r.Int(i, "tenant_id");
    d.tenant = r.Str(i, "tenant");
    d.token_id = r.Int(i, "token_id");
    d.name = r.Str(i, "name");
    d.version = static_cast<int>(r.Int(i, "version"));
    d.state = r.Str(i, "state");
    d.source = ParseJsonColumn(r.Str(i, "source"));
    d.manifest = ParseJsonColumn(r.Str(i, "manifest"));
    d.episodes = r.Int(i, "episodes");
    d.frames = r.Int(i, "frames");
    d.bytes = r.Int(i, "bytes");
    d.path = r.Str(i, "path");
    d.job_id = r.OptInt(i, "job_id");
    d.error = r.Str(i, "error");
    d.received_bytes = r.Int(i, "received_bytes");
    d.created_ms = r.Int(i, "created_ms");
    d.updated_ms = r.Int(i, "updated_ms");
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::optional<DatasetRecord>> First(Result<PgRows> r) {
  if (!r.ok()) return r.status();
  auto all = ToDatasets(*r);
  if (all.empty()) return std::optional<DatasetRecord>();
  return std::optional<DatasetRecord>(std::move(all[0]));
}

}  // namespace

Result<DatasetRecord> PgDatasetStore::Insert(const DatasetRecord& d, int64_t now_ms) {
  const char* state =
      d.state == service::kDatasetUploading ? service::kDatasetUploading : service::kDatasetImporting;
  auto r = tx_.Exec(kInsertDataset, {P(d.tenant_id), P(d.token_id), P(d.name), P(d.source.dump()),
                                     P(d.path), P(now_ms), P(std::string(state))});
  if (!r.ok()) return r.status();
  DatasetRecord out = d;
  out.id = r->Int(0, "id");
  out.version = static_cast<int>(r->Int(0, "version"));
  out.state = state;
  out.created_ms = out.updated_ms = now_ms;
  return out;
}

Result<std::optional<DatasetRecord>> PgDatasetStore::Get(int64_t id,
                                                         std::optional<int64_t> tenant_id,
                                                         bool for_update) {
  std::string sql = std::string(kSelectDataset) +
                    "WHERE d.id = $1 AND ($2::bigint IS NULL OR d.tenant_id = $2)";
  if (for_update) sql += " FOR UPDATE OF d";
  return First(tx_.Exec(sql, {P(id), tenant_id ? P(*tenant_id) : std::nullopt}));
}

Result<std::optional<DatasetRecord>> PgDatasetStore::GetByJob(int64_t job_id, bool for_update) {
  std::string sql = std::string(kSelectDataset) + "WHERE d.job_id = $1";
  if (for_update) sql += " FOR UPDATE OF d";
  return First(tx_.Exec(sql, {P(job_id)}));
}

Result<std::optional<DatasetRecord>> PgDatasetStore::Find(int64_t tenant_id,
                                                          const std::string& name,
                                                          std::optional<int> version) {
  if (version) {
    return First(tx_.Exec(std::string(kSelectDataset) +
                              "WHERE d.tenant_id = $1 AND d.name = $2 AND d.version = $3",
                          {P(tenant_id), P(name), P(*version)}));
  }
  return First(tx_.Exec(std::string(kSelectDataset) +
                            "WHERE d.tenant_id = $1 AND d.name = $2 AND d.state = 'ready'"
                            " ORDER BY d.version DESC LIMIT 1",
                        {P(tenant_id), P(name)}));
}

Result<std::vector<DatasetRecord>> PgDatasetStore::List(const service::DatasetQuery& q) {
  std::string sql = std::string(kSelectDataset) +
                    "WHERE ($1::bigint IS NULL OR d.tenant_id = $1)"
                    " AND ($2::text IS NULL OR d.name = $2)"
                    " AND ($3::boolean OR d.state <> 'deleted')"
                    " AND ($4::bigint IS NULL OR d.id < $4)"
                    " ORDER BY d.id DESC LIMIT $5";
  auto r = tx_.Exec(sql, {q.tenant_id ? P(*q.tenant_id) : std::nullopt,
                          q.name.empty() ? std::nullopt : P(q.name), P(q.include_deleted),
                          q.before_id ? P(*q.before_id) : std::nullopt, P(q.limit)});
  if (!r.ok()) return r.status();
  return ToDatasets(*r);
}

Status PgDatasetStore::Update(const DatasetRecord& d, int64_t now_ms) {
  auto r = tx_.Exec(kUpdateDataset,
                    {P(d.id), P(d.state), d.manifest.is_null() ? std::nullopt : P(d.manifest.dump()),
                     P(d.episodes), P(d.frames), P(d.bytes), P(d.path),
                     d.job_id ? P(*d.job_id) : std::nullopt, P(d.error), P(now_ms),
                     P(d.received_bytes)});
  return r.ok() ? Status::Ok() : r.status();
}

Status PgDatasetStore::BindJob(int64_t job_id, int64_t dataset_id) {
  auto r = tx_.Exec("INSERT INTO job_datasets (job_id, dataset_id) VALUES ($1, $2)",
                    {P(job_id), P(dataset_id)});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::optional<DatasetRecord>> PgDatasetStore::ForJob(int64_t job_id) {
  return First(tx_.Exec(std::string(kSelectDataset) +
                            "JOIN job_datasets b ON b.dataset_id = d.id WHERE b.job_id = $1",
                        {P(job_id)}));
}

Result<std::vector<DatasetRecord>> PgDatasetStore::AllForJob(int64_t job_id) {
  auto r = tx_.Exec(std::string(kSelectDataset) +
                        "JOIN job_datasets b ON b.dataset_id = d.id WHERE b.job_id = $1"
                        " ORDER BY d.id",
                    {P(job_id)});
  if (!r.ok()) return r.status();
  return ToDatasets(*r);
}

Result<std::vector<int64_t>> PgDatasetStore::LiveJobsReading(int64_t dataset_id) {
  auto r = tx_.Exec(
      "SELECT j.id FROM job_datasets b JOIN jobs j ON j.id = b.job_id"
      " WHERE b.dataset_id = $1 AND j.state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"
      " ORDER BY j.id",
      {P(dataset_id)});
  if (!r.ok()) return r.status();
  std::vector<int64_t> ids;
  for (size_t i = 0; i < r->size(); ++i) ids.push_back(r->Int(i, "id"));
  return ids;
}

Result<int64_t> PgDatasetStore::BytesForTenant(int64_t tenant_id, int64_t except_id) {
  auto r = tx_.Exec(kBytesForTenant, {P(tenant_id), P(except_id)});
  if (!r.ok()) return r.status();
  return r->Int(0, "bytes");
}

Result<int64_t> PgDatasetStore::CountUploading(int64_t tenant_id) {
  auto r = tx_.Exec(
      "SELECT count(*) AS n FROM datasets WHERE tenant_id = $1 AND state = 'uploading'",
      {P(tenant_id)});
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

Result<std::vector<DatasetRecord>> PgDatasetStore::StaleUploads(int64_t before_ms, int limit) {
  auto r = tx_.Exec(std::string(kSelectDataset) +
                        "WHERE d.state = 'uploading' AND d.updated_at < " EMBODY_SQL_TS("$1")
                        " ORDER BY d.updated_at, d.id LIMIT $2 FOR UPDATE OF d SKIP LOCKED",
                    {P(before_ms), P(limit)});
  if (!r.ok()) return r.status();
  return ToDatasets(*r);
}

}  // namespace controlplane::db
