// The twin's job_forecasts (service/forecast_store.h).
#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::ForecastOutcome;
using service::ForecastRecord;

Status MemoryForecastStore::Put(const std::vector<ForecastRecord>& rows) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const ForecastRecord& r : rows) {
    EMBODY_RETURN_IF_ERROR(tx_.Reference(tx_.tables.jobs.get().count(r.job_id) > 0,
                                         "job_forecasts.job_id"));
    EMBODY_ASSIGN_OR_RETURN(detail, tx_.Jsonb(r.detail));
    ForecastRecord stored = r;
    stored.detail = std::move(detail);
    tx_.tables.forecasts.mut().emplace(r.job_id, std::move(stored));  // the first is kept
  }
  return Status::Ok();
}

Result<std::map<int64_t, ForecastRecord>> MemoryForecastStore::ForJobs(
    const std::vector<int64_t>& job_ids) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::map<int64_t, ForecastRecord> out;
  const auto& rows = tx_.tables.forecasts.get();
  for (int64_t id : job_ids) {
    auto it = rows.find(id);
    if (it != rows.end()) out[id] = it->second;
  }
  return out;
}

Result<std::vector<ForecastOutcome>> MemoryForecastStore::Due(int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<ForecastOutcome> out;
  const auto& jobs = tx_.tables.jobs.get();
  for (const auto& [id, f] : tx_.tables.forecasts.get()) {
    if (static_cast<int>(out.size()) >= limit) break;
    if (!f.open) continue;
    auto j = jobs.find(id);
    if (j == jobs.end()) continue;
    const service::JobRecord& job = j->second.job;
    const bool start_due = job.started_ms && f.start_ms && !f.start_error_seconds;
    if (!start_due && !api::IsTerminal(job.state)) continue;
    out.push_back({f, job.state, job.started_ms, job.finished_ms});
  }
  return out;
}

Status MemoryForecastStore::Judge(const std::vector<ForecastRecord>& rows) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  auto& table = tx_.tables.forecasts.mut();
  for (const ForecastRecord& r : rows) {
    auto it = table.find(r.job_id);
    if (it == table.end()) continue;
    it->second.start_error_seconds = r.start_error_seconds;
    it->second.end_error_seconds = r.end_error_seconds;
    it->second.open = r.open;
  }
  return Status::Ok();
}

}  // namespace controlplane::testing
