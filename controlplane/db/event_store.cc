// Job events (state transitions, step metrics, checkpoints, anything a job posts), the
// checkpoint index and the per-rank log index.
#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::CheckpointRecord;
using service::EventRecord;

namespace {

constexpr char kSelectEvent[] =
    "SELECT id, job_id, " EMBODY_SQL_MS("time") " AS time_ms, type, data::text AS data"
    " FROM job_events ";

std::vector<EventRecord> ToEvents(const PgRows& r) {
  std::vector<EventRecord> out;
  for (size_t i = 0; i < r.size(); ++i) {
    out.push_back({r.Int(i, "id"), r.Int(i, "job_id"), r.Int(i, "time_ms"), r.Str(i, "type"),
                   ParseJsonColumn(r.Str(i, "data"))});
  }
  return out;
}

}  // namespace

Result<int64_t> PgEventStore::Append(int64_t job_id, int64_t time_ms, const std::string& type,
                                     const nlohmann::json& data) {
  auto r = tx_.Exec("INSERT INTO job_events (job_id, time, type, data)"
                    " VALUES ($1, " EMBODY_SQL_TS("$2") ", $3, $4::jsonb) RETURNING id",
                    {P(job_id), P(time_ms), P(type),
                     P(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))});
  if (!r.ok()) return r.status();
  return r->Int(0, "id");
}

Result<std::vector<EventRecord>> PgEventStore::List(int64_t job_id, int64_t after_id,
                                                    const std::string& type, int limit) {
  auto r = tx_.Exec(std::string(kSelectEvent) +
                        "WHERE job_id = $1 AND id > $2 AND ($3::text IS NULL OR type = $3)"
                        " ORDER BY id LIMIT $4",
                    {P(job_id), P(after_id), type.empty() ? std::nullopt : P(type), P(limit)});
  if (!r.ok()) return r.status();
  return ToEvents(*r);
}

Result<std::optional<EventRecord>> PgEventStore::Latest(int64_t job_id, const std::string& type) {
  auto r = tx_.Exec(std::string(kSelectEvent) +
                        "WHERE job_id = $1 AND type = $2 ORDER BY id DESC LIMIT 1",
                    {P(job_id), P(type)});
  if (!r.ok()) return r.status();
  auto events = ToEvents(*r);
  if (events.empty()) return std::optional<EventRecord>();
  return std::optional<EventRecord>(std::move(events[0]));
}

Status PgEventStore::AddCheckpoint(int64_t job_id, const CheckpointRecord& c, int64_t time_ms) {
  auto r = tx_.Exec("INSERT INTO checkpoints (job_id, step, path, bytes, created_at)"
                    " VALUES ($1, $2, $3, $4, " EMBODY_SQL_TS("$5") ")",
                    {P(job_id), P(c.step), P(c.path), P(c.bytes), P(time_ms)});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::optional<CheckpointRecord>> PgEventStore::LatestCheckpoint(int64_t job_id) {
  auto r = tx_.Exec("SELECT step, path, bytes FROM checkpoints WHERE job_id = $1"
                    " ORDER BY step DESC, id DESC LIMIT 1",
                    {P(job_id)});
  if (!r.ok()) return r.status();
  if (r->empty()) return std::optional<CheckpointRecord>();
  return std::optional<CheckpointRecord>(
      CheckpointRecord{r->Int(0, "step"), r->Str(0, "path"), r->Int(0, "bytes")});
}

Status PgLogIndex::Upsert(int64_t job_id, const service::LogRecord& log) {
  auto r = tx_.Exec("INSERT INTO job_logs (job_id, rank, path, bytes) VALUES ($1, $2, $3, $4)"
                    " ON CONFLICT (job_id, rank) DO UPDATE SET path = EXCLUDED.path,"
                    " bytes = EXCLUDED.bytes",
                    {P(job_id), P(log.rank), P(log.path), P(log.bytes)});
  return r.ok() ? Status::Ok() : r.status();
}

Result<std::vector<service::LogRecord>> PgLogIndex::ForJob(int64_t job_id) {
  auto r = tx_.Exec("SELECT rank, path, bytes FROM job_logs WHERE job_id = $1 ORDER BY rank",
                    {P(job_id)});
  if (!r.ok()) return r.status();
  std::vector<service::LogRecord> out;
  for (size_t i = 0; i < r->size(); ++i) {
    out.push_back({static_cast<int>(r->Int(i, "rank")), r->Str(i, "path"), r->Int(i, "bytes")});
  }
  return out;
}

}  // namespace controlplane::db
