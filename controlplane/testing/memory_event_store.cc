// The twin's job events, checkpoints and log index, mirroring controlplane/db/event_store.cc,
// including SampleSteps' bucketing: [lo, hi] cut into n = min(max_points, hi-lo+1) buckets,
// bucket b holding steps [lo + ceil(b·w/n), lo + ceil((b+1)·w/n)) with w = hi-lo+1, each
// answered by its highest step, then newest row.
#include <algorithm>
#include <set>
#include <tuple>

#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::CheckpointRecord;
using service::EventRecord;

Result<int64_t> MemoryEventStore::Insert(EventRow row) {
  EMBODY_RETURN_IF_ERROR(tx_.Text(row.e.type));
  EMBODY_ASSIGN_OR_RETURN(data, tx_.Jsonb(row.e.data));
  row.e.data = std::move(data);
  row.e.id = ++tx_.seq.events;
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.jobs.get().count(row.e.job_id) > 0, "job_events.job_id"));
  const int64_t id = row.e.id;
  tx_.tables.events.mut().emplace(id, std::move(row));
  return id;
}

Result<int64_t> MemoryEventStore::Append(int64_t job_id, int64_t time_ms, const std::string& type,
                                         const nlohmann::json& data) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EventRow row;
  row.e = {0, job_id, time_ms, type, data};
  return Insert(std::move(row));
}

Result<int64_t> MemoryEventStore::AppendStep(int64_t job_id, int64_t time_ms, int64_t step,
                                             const nlohmann::json& data, bool provisional) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EventRow row;
  row.e = {0, job_id, time_ms, "step", data};
  row.step = step;
  row.provisional = provisional;
  return Insert(std::move(row));
}

Status MemoryEventStore::DropProvisionalSteps(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.events.get();
  const bool any = std::any_of(all.begin(), all.end(), [&](const auto& kv) {
    return kv.second.e.job_id == job_id && kv.second.provisional;
  });
  if (!any) return Status::Ok();
  std::erase_if(tx_.tables.events.mut(), [&](const auto& kv) {
    return kv.second.e.job_id == job_id && kv.second.provisional;
  });
  return Status::Ok();
}

Result<std::vector<service::StepSample>> MemoryEventStore::SampleSteps(
    int64_t job_id, const service::StepQuery& q) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<const EventRow*> rows;
  for (const auto& [id, row] : tx_.tables.events.get()) {
    if (row.e.job_id == job_id && row.e.type == "step" && row.step && *row.step >= q.since_step &&
        row.e.time_ms >= q.since_ms) {
      rows.push_back(&row);
    }
  }
  if (rows.empty()) return std::vector<service::StepSample>();
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const EventRow* r : rows) {
    lo = std::min(lo, *r->step);
    hi = std::max(hi, *r->step);
  }
  const __int128 w = static_cast<__int128>(hi) - lo + 1;
  const __int128 n = std::min<__int128>(q.max_points, w);
  if (n <= 0) return std::vector<service::StepSample>();
  // Step s lies in bucket b when ceil(b·w/n) <= s-lo < ceil((b+1)·w/n), that is
  // b = floor((s-lo)·n/w).
  std::map<__int128, const EventRow*> best;  // bucket -> its row
  for (const EventRow* r : rows) {
    const __int128 b = (static_cast<__int128>(*r->step) - lo) * n / w;
    const EventRow*& kept = best[b];
    if (!kept || *r->step > *kept->step || (*r->step == *kept->step && r->e.id > kept->e.id)) {
      kept = r;
    }
  }
  std::vector<service::StepSample> out;
  out.reserve(best.size());
  for (const auto& [b, r] : best) out.push_back({*r->step, r->e.time_ms, r->e.data});
  return out;
}

Result<std::vector<EventRecord>> MemoryEventStore::List(int64_t job_id, int64_t after_id,
                                                        const std::string& type, int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(type));
  if (limit < 0) return tx_.Fail(common::Internal("memory database: LIMIT must not be negative"));
  std::vector<EventRecord> out;
  const auto& all = tx_.tables.events.get();
  for (auto it = all.upper_bound(after_id); it != all.end() && static_cast<int>(out.size()) < limit;
       ++it) {
    const EventRecord& e = it->second.e;
    if (e.job_id == job_id && (type.empty() || e.type == type)) out.push_back(e);
  }
  return out;
}

Result<std::optional<EventRecord>> MemoryEventStore::Latest(int64_t job_id,
                                                            const std::string& type) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(type));
  const auto& all = tx_.tables.events.get();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->second.e.job_id == job_id && it->second.e.type == type) {
      return std::optional<EventRecord>(it->second.e);
    }
  }
  return std::optional<EventRecord>();
}

Status MemoryEventStore::AddCheckpoint(int64_t job_id, const CheckpointRecord& c, int64_t time_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(c.path));
  const int64_t id = ++tx_.seq.checkpoints;
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.jobs.get().count(job_id) > 0, "checkpoints.job_id"));
  tx_.tables.checkpoints.mut().emplace(id, CheckpointRow{job_id, c, time_ms});
  return Status::Ok();
}

Result<std::optional<CheckpointRecord>> MemoryEventStore::LatestCheckpoint(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const CheckpointRow* latest = nullptr;  // highest step, then newest row
  for (const auto& [id, row] : tx_.tables.checkpoints.get()) {
    if (row.job_id == job_id && (!latest || row.c.step >= latest->c.step)) latest = &row;
  }
  if (!latest) return std::optional<CheckpointRecord>();
  return std::optional<CheckpointRecord>(latest->c);
}

Status MemoryLogIndex::Upsert(int64_t job_id, const service::LogRecord& log) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(log.path));
  EMBODY_RETURN_IF_ERROR(tx_.Reference(tx_.tables.jobs.get().count(job_id) > 0, "job_logs.job_id"));
  tx_.tables.logs.mut()[{job_id, log.attempt, log.rank}] = log;
  return Status::Ok();
}

Result<std::vector<service::LogRecord>> MemoryLogIndex::ForJob(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<service::LogRecord> out;
  const auto& all = tx_.tables.logs.get();
  for (auto it = all.lower_bound({job_id, INT_MIN, INT_MIN});
       it != all.end() && std::get<0>(it->first) == job_id; ++it) {
    out.push_back(it->second);
  }
  return out;
}

Result<std::vector<int64_t>> MemoryLogIndex::FinishedWithHistory(int64_t finished_before_ms,
                                                                 int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::set<int64_t> with_history;
  for (const auto& [key, log] : tx_.tables.logs.get()) with_history.insert(std::get<0>(key));
  for (const auto& [id, row] : tx_.tables.events.get()) {
    if (row.e.type != "state") with_history.insert(row.e.job_id);
  }
  std::vector<std::pair<int64_t, int64_t>> found;  // (finished, id)
  for (const auto& [id, row] : tx_.tables.jobs.get()) {
    const auto& f = row.job.finished_ms;
    if (f && *f < finished_before_ms && with_history.count(id)) found.push_back({*f, id});
  }
  std::sort(found.begin(), found.end());
  std::vector<int64_t> out;
  for (const auto& [f, id] : found) {
    if (static_cast<int>(out.size()) == limit) break;
    out.push_back(id);
  }
  return out;
}

Status MemoryLogIndex::PruneHistory(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::erase_if(tx_.tables.logs.mut(),
                [&](const auto& kv) { return std::get<0>(kv.first) == job_id; });
  std::erase_if(tx_.tables.events.mut(), [&](const auto& kv) {
    return kv.second.e.job_id == job_id && kv.second.e.type != "state";
  });
  return Status::Ok();
}

}  // namespace controlplane::testing

namespace controlplane::testing {

common::Status MemoryEventStore::PutEvaluation(int64_t job_id,
                                               const service::EvaluationRecord& r) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(r.task));
  EMBODY_RETURN_IF_ERROR(tx_.Text(r.policy));
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.jobs.get().count(job_id) > 0, "job_evaluations.job_id"));
  tx_.tables.evaluations.mut()[{job_id, r.task}] = r;
  return common::Status::Ok();
}

common::Result<std::vector<service::EvaluationRecord>> MemoryEventStore::Evaluations(
    int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<service::EvaluationRecord> out;
  const auto& all = tx_.tables.evaluations.get();
  for (auto it = all.lower_bound({job_id, ""}); it != all.end() && it->first.first == job_id;
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

}  // namespace controlplane::testing
