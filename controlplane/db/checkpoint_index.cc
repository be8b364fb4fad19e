// The blob-store rows of the checkpoints table (service/checkpoint_index.h).
#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::CheckpointBlob;

namespace {

constexpr char kSelectBlob[] =
    "SELECT id, job_id, tenant_id, step, bytes, received_bytes, coalesce(sha256, '') AS sha256,"
    " state, metrics::text AS metrics, " EMBODY_SQL_MS("created_at") " AS created_ms, "
    EMBODY_SQL_MS("updated_at") " AS updated_ms FROM checkpoints ";

std::vector<CheckpointBlob> ToBlobs(const PgRows& r) {
  std::vector<CheckpointBlob> out;
  for (size_t i = 0; i < r.size(); ++i) {
    CheckpointBlob c;
    c.id = r.Int(i, "id");
    c.job_id = r.Int(i, "job_id");
    c.tenant_id = r.Int(i, "tenant_id");
    c.step = r.Int(i, "step");
    c.bytes = r.Int(i, "bytes");
    c.received_bytes = r.Int(i, "received_bytes");
    c.sha256 = r.Str(i, "sha256");
    c.state = r.Str(i, "state");
    c.metrics = ParseJsonColumn(r.Str(i, "metrics"));
    c.created_ms = r.Int(i, "created_ms");
    c.updated_ms = r.Int(i, "updated_ms");
    out.push_back(std::move(c));
  }
  return out;
}

Result<std::optional<CheckpointBlob>> First(const Result<PgRows>& r) {
  if (!r.ok()) return r.status();
  auto blobs = ToBlobs(*r);
  if (blobs.empty()) return std::optional<CheckpointBlob>();
  return std::optional<CheckpointBlob>(std::move(blobs[0]));
}

}  // namespace

Result<int64_t> PgCheckpointIndex::InsertUpload(const CheckpointBlob& c, int64_t now_ms) {
  auto r = tx_.Exec(
      "INSERT INTO checkpoints (job_id, tenant_id, step, path, bytes, sha256, metrics, state,"
      " received_bytes, created_at, updated_at)"
      " VALUES ($1, $2, $3, '', $4, $5, $6::jsonb, 'uploading', 0, " EMBODY_SQL_TS(
          "$7") ", " EMBODY_SQL_TS("$7") ") RETURNING id",
      {P(c.job_id), P(c.tenant_id), P(c.step), P(c.bytes), P(c.sha256), P(c.metrics.dump()),
       P(now_ms)});
  if (!r.ok()) return r.status();
  return r->Int(0, "id");
}

Result<std::optional<CheckpointBlob>> PgCheckpointIndex::Get(int64_t id, bool for_update) {
  return First(tx_.Exec(std::string(kSelectBlob) + "WHERE id = $1 AND state <> 'local'" +
                            (for_update ? " FOR UPDATE" : ""),
                        {P(id)}));
}

Status PgCheckpointIndex::SetReceived(int64_t id, int64_t received_bytes, int64_t now_ms) {
  auto r = tx_.Exec("UPDATE checkpoints SET received_bytes = $2, updated_at = " EMBODY_SQL_TS(
                        "$3") " WHERE id = $1 AND state = 'uploading'",
                    {P(id), P(received_bytes), P(now_ms)});
  return r.ok() ? Status::Ok() : r.status();
}

Status PgCheckpointIndex::MarkReady(int64_t id, int64_t now_ms) {
  auto r = tx_.Exec("UPDATE checkpoints SET state = 'ready', updated_at = " EMBODY_SQL_TS(
                        "$2") " WHERE id = $1 AND state = 'uploading'",
                    {P(id), P(now_ms)});
  return r.ok() ? Status::Ok() : r.status();
}

Status PgCheckpointIndex::Delete(int64_t id) {
  auto r = tx_.Exec("DELETE FROM checkpoints WHERE id = $1 AND state <> 'local'", {P(id)});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<CheckpointBlob>> PgCheckpointIndex::ListReady(int64_t job_id) {
  auto r =
      tx_.Exec(std::string(kSelectBlob) + "WHERE job_id = $1 AND state = 'ready' ORDER BY step, id",
               {P(job_id)});
  if (!r.ok()) return r.status();
  return ToBlobs(*r);
}

Result<std::optional<CheckpointBlob>> PgCheckpointIndex::LatestReady(int64_t job_id) {
  return First(tx_.Exec(std::string(kSelectBlob) +
                            "WHERE job_id = $1 AND state = 'ready' ORDER BY step DESC, id DESC"
                            " LIMIT 1",
                        {P(job_id)}));
}

Result<int64_t> PgCheckpointIndex::CountForJob(int64_t job_id) {
  auto r = tx_.Exec("SELECT count(*) AS n FROM checkpoints WHERE job_id = $1 AND state <> 'local'",
                    {P(job_id)});
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

Result<int64_t> PgCheckpointIndex::BytesForTenant(int64_t tenant_id) {
  auto r = tx_.Exec(
      "SELECT coalesce(sum(bytes), 0)::bigint AS n FROM checkpoints"
      " WHERE tenant_id = $1 AND state <> 'local'",
      {P(tenant_id)});
  if (!r.ok()) return r.status();
  return r->Int(0, "n");
}

Result<std::vector<CheckpointBlob>> PgCheckpointIndex::StaleUploads(int64_t before_ms, int limit) {
  auto r = tx_.Exec(std::string(kSelectBlob) +
                        "WHERE state = 'uploading' AND updated_at < " EMBODY_SQL_TS("$1") +
                        " ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED",
                    {P(before_ms), P(limit)});
  if (!r.ok()) return r.status();
  return ToBlobs(*r);
}

}  // namespace controlplane::db
