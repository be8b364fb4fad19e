// The batch reads and writes of the store interfaces (store.h) written over their one-row forms:
// correct for any store, one statement per row. The in-memory twin uses them as they are;
// PostgreSQL overrides each with one set-based statement (controlplane/db), which is what keeps
// a heartbeat or a page of jobs at a fixed number of round trips whatever its size.
#include "controlplane/service/store.h"

namespace controlplane::service {

Result<std::vector<JobRecord>> JobStore::GetMany(const std::vector<int64_t>& ids,
                                                 bool for_update) {
  std::vector<int64_t> sorted(ids);
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<JobRecord> out;
  for (int64_t id : sorted) {
    EMBODY_ASSIGN_OR_RETURN(job, Get(id, std::nullopt, for_update));
    if (job) out.push_back(std::move(*job));
  }
  return out;
}

Result<std::vector<int64_t>> JobStore::InsertMany(const std::vector<NewJob>& jobs) {
  std::vector<int64_t> ids;
  for (const NewJob& j : jobs) {
    EMBODY_ASSIGN_OR_RETURN(id, Insert(j));
    ids.push_back(id);
  }
  return ids;
}

Status EventStore::AppendMany(const std::vector<EventRecord>& events) {
  for (const EventRecord& e : events) {
    EMBODY_RETURN_IF_ERROR(Append(e.job_id, e.time_ms, e.type, e.data).status());
  }
  return Status::Ok();
}

Result<std::vector<int64_t>> AuditStore::AppendMany(const std::vector<AuditRecord>& rows) {
  std::vector<int64_t> ids;
  for (const AuditRecord& r : rows) {
    EMBODY_ASSIGN_OR_RETURN(id, Append(r));
    ids.push_back(id);
  }
  return ids;
}

Result<std::map<int64_t, std::vector<AllocationRecord>>> AllocationStore::ForJobs(
    const std::vector<int64_t>& job_ids) {
  std::map<int64_t, std::vector<AllocationRecord>> out;
  for (int64_t id : job_ids) {
    if (out.count(id)) continue;
    EMBODY_ASSIGN_OR_RETURN(allocs, ForJob(id));
    if (!allocs.empty()) out[id] = std::move(allocs);
  }
  return out;
}

Result<std::map<int64_t, std::vector<AllocationRecord>>> AllocationStore::PlacementForJobs(
    const std::vector<int64_t>& job_ids) {
  std::map<int64_t, std::vector<AllocationRecord>> out;
  for (int64_t id : job_ids) {
    if (out.count(id)) continue;
    EMBODY_ASSIGN_OR_RETURN(allocs, PlacementForJob(id));
    if (!allocs.empty()) out[id] = std::move(allocs);
  }
  return out;
}

Status AllocationStore::MarkLaunchedMany(const std::vector<int64_t>& job_ids, int64_t node_id) {
  for (int64_t id : job_ids) EMBODY_RETURN_IF_ERROR(MarkLaunched(id, node_id));
  return Status::Ok();
}

Status AllocationStore::CountLaunchesSent(const std::vector<int64_t>& job_ids, int64_t node_id) {
  for (int64_t id : job_ids) EMBODY_RETURN_IF_ERROR(CountLaunchSent(id, node_id));
  return Status::Ok();
}

Result<std::map<int64_t, EventRecord>> EventStore::LatestOfJobs(
    const std::vector<int64_t>& job_ids, const std::string& type) {
  std::map<int64_t, EventRecord> out;
  for (int64_t id : job_ids) {
    EMBODY_ASSIGN_OR_RETURN(e, Latest(id, type));
    if (e) out[id] = std::move(*e);
  }
  return out;
}

Result<std::map<int64_t, CheckpointRecord>> EventStore::LatestCheckpoints(
    const std::vector<int64_t>& job_ids) {
  std::map<int64_t, CheckpointRecord> out;
  for (int64_t id : job_ids) {
    EMBODY_ASSIGN_OR_RETURN(c, LatestCheckpoint(id));
    if (c) out[id] = std::move(*c);
  }
  return out;
}

}  // namespace controlplane::service
