// Forecasts of submitted jobs (service/forecast_store.h; table of migration 0020). Rows go in
// as one jsonb array per statement: the recorder writes a burst of submissions' at once.
#include <cstdlib>

#include "controlplane/db/stores.h"

namespace controlplane::db {

using common::Result;
using common::Status;
using service::ForecastOutcome;
using service::ForecastRecord;

namespace {

constexpr char kPut[] =
    "INSERT INTO job_forecasts (job_id, made_at, predicted_start, predicted_run_seconds,"
    " predicted_end, detail)"
    " SELECT job_id, " EMBODY_SQL_TS("made_ms") ", " EMBODY_SQL_TS("start_ms") ", run_seconds, "
    EMBODY_SQL_TS("end_ms") ", detail"
    " FROM jsonb_to_recordset($1::jsonb) AS x(job_id bigint, made_ms bigint, start_ms bigint,"
    " run_seconds double precision, end_ms bigint, detail jsonb)"
    " ON CONFLICT (job_id) DO NOTHING";

#define EMBODY_FORECAST_COLUMNS                                                             \
  "f.job_id, " EMBODY_SQL_MS("f.made_at") " AS made_ms, " EMBODY_SQL_MS(                    \
      "f.predicted_start") " AS start_ms, f.predicted_run_seconds::text AS run_s, "         \
  EMBODY_SQL_MS("f.predicted_end") " AS end_ms, f.detail::text AS detail,"                  \
  " f.start_error_seconds::text AS start_err, f.end_error_seconds::text AS end_err, f.open"

constexpr char kForJobs[] = "SELECT " EMBODY_FORECAST_COLUMNS
                            " FROM job_forecasts f WHERE f.job_id = ANY($1::bigint[])";

constexpr char kDue[] =
    "SELECT " EMBODY_FORECAST_COLUMNS ", j.state, " EMBODY_SQL_MS("j.started_at") " AS started_ms, "
    EMBODY_SQL_MS("j.finished_at") " AS finished_ms"
    " FROM job_forecasts f JOIN jobs j ON j.id = f.job_id"
    " WHERE f.open AND ((j.started_at IS NOT NULL AND f.start_error_seconds IS NULL"
    " AND f.predicted_start IS NOT NULL)"
    " OR j.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED'))"
    " ORDER BY f.job_id LIMIT $1 FOR UPDATE OF f SKIP LOCKED";

constexpr char kJudge[] =
    "UPDATE job_forecasts f SET start_error_seconds = x.start_err,"
    " end_error_seconds = x.end_err, open = x.open"
    " FROM jsonb_to_recordset($1::jsonb) AS x(job_id bigint, start_err double precision,"
    " end_err double precision, open boolean) WHERE f.job_id = x.job_id";

nlohmann::json OptJson(const std::optional<int64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json OptJson(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::optional<double> OptDouble(const PgRows& rows, size_t i, const char* col) {
  if (rows.IsNull(i, col)) return std::nullopt;
  return std::strtod(rows.Str(i, col).c_str(), nullptr);
}

ForecastRecord ReadForecast(const PgRows& rows, size_t i) {
  ForecastRecord f;
  f.job_id = rows.Int(i, "job_id");
  f.made_ms = rows.Int(i, "made_ms");
  f.start_ms = rows.OptInt(i, "start_ms");
  f.run_seconds = OptDouble(rows, i, "run_s");
  f.end_ms = rows.OptInt(i, "end_ms");
  f.detail = ParseJsonColumn(rows.Str(i, "detail"));
  f.start_error_seconds = OptDouble(rows, i, "start_err");
  f.end_error_seconds = OptDouble(rows, i, "end_err");
  f.open = rows.Bool(i, "open");
  return f;
}

}  // namespace

Status PgForecastStore::Put(const std::vector<ForecastRecord>& rows) {
  if (rows.empty()) return Status::Ok();
  nlohmann::json j = nlohmann::json::array();
  for (const ForecastRecord& r : rows) {
    j.push_back({{"job_id", r.job_id},
                 {"made_ms", r.made_ms},
                 {"start_ms", OptJson(r.start_ms)},
                 {"run_seconds", OptJson(r.run_seconds)},
                 {"end_ms", OptJson(r.end_ms)},
                 {"detail", r.detail}});
  }
  auto done = tx_.Exec(kPut, {JsonRows(j)});
  return done.ok() ? Status::Ok() : done.status();
}

Result<std::map<int64_t, ForecastRecord>> PgForecastStore::ForJobs(
    const std::vector<int64_t>& job_ids) {
  std::map<int64_t, ForecastRecord> out;
  if (job_ids.empty()) return out;
  EMBODY_ASSIGN_OR_RETURN(rows, tx_.Exec(kForJobs, {IdArray(job_ids)}));
  for (size_t i = 0; i < rows.size(); ++i) {
    ForecastRecord f = ReadForecast(rows, i);
    out[f.job_id] = std::move(f);
  }
  return out;
}

Result<std::vector<ForecastOutcome>> PgForecastStore::Due(int limit) {
  EMBODY_ASSIGN_OR_RETURN(rows, tx_.Exec(kDue, {P(limit)}));
  std::vector<ForecastOutcome> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    ForecastOutcome o;
    o.forecast = ReadForecast(rows, i);
    o.state = api::ParseJobState(rows.Str(i, "state")).value_or(api::JobState::kPending);
    o.started_ms = rows.OptInt(i, "started_ms");
    o.finished_ms = rows.OptInt(i, "finished_ms");
    out.push_back(std::move(o));
  }
  return out;
}

Status PgForecastStore::Judge(const std::vector<ForecastRecord>& rows) {
  if (rows.empty()) return Status::Ok();
  nlohmann::json j = nlohmann::json::array();
  for (const ForecastRecord& r : rows) {
    j.push_back({{"job_id", r.job_id},
                 {"start_err", OptJson(r.start_error_seconds)},
                 {"end_err", OptJson(r.end_error_seconds)},
                 {"open", r.open}});
  }
  auto done = tx_.Exec(kJudge, {JsonRows(j)});
  return done.ok() ? Status::Ok() : done.status();
}

}  // namespace controlplane::db
