// The twin's jobs and allocations, mirroring controlplane/db/job_store.cc and node_store.cc:
// the same orderings, filters, limits and codes.
#include <algorithm>
#include <cctype>

#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::AllocationRecord;
using service::JobRecord;

namespace {

bool InStates(api::JobState s, const std::vector<api::JobState>& states) {
  return std::find(states.begin(), states.end(), s) != states.end();
}

// lower() of the "C" collation the clusters are created with (initdb --no-locale): ASCII only.
std::string AsciiLower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

JobRecord MemoryJobStore::Read(const JobRow& row) const {
  JobRecord j = row.job;
  j.tenant = TenantName(tx_.tables, j.tenant_id);
  return j;
}

Result<int64_t> MemoryJobStore::Insert(const service::NewJob& job) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const std::string* s : {&job.name, &job.kind, &job.idempotency_key, &job.request_sha256}) {
    EMBODY_RETURN_IF_ERROR(tx_.Text(*s));
  }
  EMBODY_ASSIGN_OR_RETURN(spec, tx_.Jsonb(job.spec));
  const int64_t id = ++tx_.seq.jobs;  // taken even when the insert does nothing, as nextval is
  if (!job.idempotency_key.empty()) {
    for (const auto& [other_id, row] : tx_.tables.jobs.get()) {
      // ON CONFLICT DO NOTHING: refused, and the transaction goes on.
      if (row.job.tenant_id == job.tenant_id && row.idempotency_key == job.idempotency_key) {
        return Status(common::Code::kAlreadyExists, "idempotency key already used");
      }
    }
  }
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.tenants.get().count(job.tenant_id) > 0, "jobs.tenant_id"));
  EMBODY_RETURN_IF_ERROR(tx_.Reference(
      job.token_id == 0 || tx_.tables.tokens.get().count(job.token_id) > 0, "jobs.token_id"));
  JobRow row;
  row.job.id = id;
  row.job.tenant_id = job.tenant_id;
  row.job.token_id = job.token_id;
  row.job.request_sha256 = job.request_sha256;
  row.job.name = job.name;
  row.job.kind = job.kind;
  row.job.state = api::JobState::kPending;
  row.job.priority = job.priority;
  row.job.spec = std::move(spec);
  row.job.created_ms = job.now_ms;
  row.job.updated_ms = job.now_ms;
  row.job.version = ++tx_.seq.job_versions;
  if (!job.idempotency_key.empty()) row.idempotency_key = job.idempotency_key;
  tx_.tables.jobs.mut().emplace(id, std::move(row));
  return id;
}

Result<std::optional<JobRecord>> MemoryJobStore::Get(int64_t id, std::optional<int64_t> tenant_id,
                                                     bool /*for_update: units are serialised*/) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& jobs = tx_.tables.jobs.get();
  auto it = jobs.find(id);
  if (it == jobs.end() || (tenant_id && it->second.job.tenant_id != *tenant_id)) {
    return std::optional<JobRecord>();
  }
  return std::optional<JobRecord>(Read(it->second));
}

Result<std::optional<JobRecord>> MemoryJobStore::GetByIdempotencyKey(int64_t tenant_id,
                                                                     const std::string& key) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(key));
  for (const auto& [id, row] : tx_.tables.jobs.get()) {
    if (row.job.tenant_id == tenant_id && row.idempotency_key == key) {
      return std::optional<JobRecord>(Read(row));
    }
  }
  return std::optional<JobRecord>();
}

Result<std::vector<JobRecord>> MemoryJobStore::List(const service::JobQuery& q) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(q.name_contains));
  if (q.limit < 0) return tx_.Fail(common::Internal("memory database: LIMIT must not be negative"));
  const std::string needle = AsciiLower(q.name_contains);
  std::vector<JobRecord> out;
  const auto& jobs = tx_.tables.jobs.get();
  for (auto it = jobs.rbegin(); it != jobs.rend() && static_cast<int>(out.size()) < q.limit; ++it) {
    const JobRecord& j = it->second.job;
    if (q.tenant_id && j.tenant_id != *q.tenant_id) continue;
    if (q.state && j.state != *q.state) continue;
    if (q.before_id && j.id >= *q.before_id) continue;
    if (!needle.empty() && AsciiLower(j.name).find(needle) == std::string::npos) continue;
    out.push_back(Read(it->second));
  }
  return out;
}

Result<std::vector<JobRecord>> MemoryJobStore::ListInStates(
    const std::vector<api::JobState>& states, bool /*for_update: units are serialised*/) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<JobRecord> out;
  for (const auto& [id, row] : tx_.tables.jobs.get()) {
    if (InStates(row.job.state, states)) out.push_back(Read(row));
  }
  return out;
}

Status MemoryJobStore::Update(const JobRecord& j) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(j.reason));
  if (tx_.tables.jobs.get().count(j.id) == 0) return Status::Ok();  // UPDATE of no row
  JobRecord& row = tx_.tables.jobs.mut().at(j.id).job;
  row.state = j.state;
  row.reason = j.reason;
  row.attempt = j.attempt;
  row.exit_code = j.exit_code;
  row.updated_ms = j.updated_ms;
  row.started_ms = j.started_ms;
  row.finished_ms = j.finished_ms;
  row.version = ++tx_.seq.job_versions;
  return Status::Ok();
}

Result<std::vector<service::JobVersion>> MemoryJobStore::PendingVersions() {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<service::JobVersion> out;
  for (const auto& [id, row] : tx_.tables.jobs.get()) {
    if (row.job.state == api::JobState::kPending) out.push_back({id, row.job.version});
  }
  return out;
}

Result<std::vector<service::JobVersion>> MemoryJobStore::SetWaitingReasons(
    const std::vector<std::pair<int64_t, std::string>>& reasons, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const auto& [id, reason] : reasons) EMBODY_RETURN_IF_ERROR(tx_.Text(reason));
  std::vector<service::JobVersion> out;
  for (const auto& [id, reason] : reasons) {
    auto it = tx_.tables.jobs.get().find(id);
    if (it == tx_.tables.jobs.get().end() || it->second.job.state != api::JobState::kPending) {
      continue;
    }
    JobRecord& row = tx_.tables.jobs.mut().at(id).job;
    row.reason = reason;
    row.updated_ms = now_ms;
    row.version = ++tx_.seq.job_versions;
    out.push_back({id, row.version});
  }
  return out;
}

Result<int64_t> MemoryJobStore::CountForTenant(int64_t tenant_id,
                                               const std::vector<api::JobState>& states) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  int64_t n = 0;
  for (const auto& [id, row] : tx_.tables.jobs.get()) {
    if (row.job.tenant_id == tenant_id && InStates(row.job.state, states)) ++n;
  }
  return n;
}

// PostgreSQL keeps this count in a table; here counting is the same answer.
Result<int64_t> MemoryJobStore::PendingCount(int64_t tenant_id) {
  return CountForTenant(tenant_id, {api::JobState::kPending});
}

Result<std::map<std::pair<std::string, std::string>, int64_t>>
MemoryJobStore::CountByStateAndTenant() {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::map<std::pair<std::string, std::string>, int64_t> out;
  for (const auto& [id, row] : tx_.tables.jobs.get()) {
    out[{api::JobStateName(row.job.state), TenantName(tx_.tables, row.job.tenant_id)}] += 1;
  }
  return out;
}

// --- allocations -------------------------------------------------------------------------------

std::vector<AllocationRecord> MemoryAllocationStore::Rows(int64_t job_id, bool live_only) const {
  std::vector<AllocationRecord> out;
  const auto& nodes = tx_.tables.nodes.get();
  for (const auto& [key, row] : tx_.tables.allocations.get()) {
    if ((job_id != 0 && key.first != job_id) || (live_only && row.released)) continue;
    AllocationRecord a = row.a;
    auto n = nodes.find(a.node_id);
    if (n != nodes.end()) {
      a.node_name = n->second.name;
      a.node_address = n->second.address;
      a.node_agent_url = n->second.agent_url;
    }
    out.push_back(std::move(a));
  }
  return out;
}

namespace {
// ORDER BY is_head DESC, node_id
void HeadFirst(std::vector<AllocationRecord>& v) {
  std::stable_sort(v.begin(), v.end(), [](const AllocationRecord& a, const AllocationRecord& b) {
    return a.is_head != b.is_head ? a.is_head : a.node_id < b.node_id;
  });
}
}  // namespace

Status MemoryAllocationStore::Insert(const AllocationRecord& a) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(a.slot_type));
  if (tx_.tables.allocations.get().count({a.job_id, a.node_id}) > 0) {
    return tx_.Fail(Status(common::Code::kAlreadyExists,
                           "memory database: duplicate key value violates job_allocations_pkey"));
  }
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.jobs.get().count(a.job_id) > 0, "job_allocations.job_id"));
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.nodes.get().count(a.node_id) > 0, "job_allocations.node_id"));
  AllocationRow row;
  row.a = a;
  row.a.node_name.clear();
  row.a.node_address.clear();
  row.a.node_agent_url.clear();
  tx_.tables.allocations.mut().emplace(std::make_pair(a.job_id, a.node_id), std::move(row));
  return Status::Ok();
}

Result<std::vector<AllocationRecord>> MemoryAllocationStore::ForJob(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (job_id == 0) return std::vector<AllocationRecord>();
  auto v = Rows(job_id, true);
  HeadFirst(v);
  return v;
}

Result<std::vector<AllocationRecord>> MemoryAllocationStore::PlacementForJob(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (job_id == 0) return std::vector<AllocationRecord>();
  auto v = Rows(job_id, false);
  HeadFirst(v);
  return v;
}

Result<std::vector<AllocationRecord>> MemoryAllocationStore::ForNode(int64_t node_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<AllocationRecord> out;
  for (AllocationRecord& a : Rows(0, true)) {  // by job id: the map's order
    if (a.node_id == node_id) out.push_back(std::move(a));
  }
  return out;
}

Result<std::vector<AllocationRecord>> MemoryAllocationStore::All() {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  return Rows(0, true);  // by job id, then node id: the map's order
}

Status MemoryAllocationStore::MarkLaunched(int64_t job_id, int64_t node_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (tx_.tables.allocations.get().count({job_id, node_id}) == 0) return Status::Ok();
  tx_.tables.allocations.mut().at({job_id, node_id}).a.launched = true;
  return Status::Ok();
}

Status MemoryAllocationStore::CountLaunchSent(int64_t job_id, int64_t node_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (tx_.tables.allocations.get().count({job_id, node_id}) == 0) return Status::Ok();
  tx_.tables.allocations.mut().at({job_id, node_id}).a.launch_sends += 1;
  return Status::Ok();
}

Status MemoryAllocationStore::ReleaseForJob(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.allocations.get();
  auto first = all.lower_bound({job_id, INT64_MIN});
  if (first == all.end() || first->first.first != job_id) return Status::Ok();
  auto& rows = tx_.tables.allocations.mut();
  for (auto it = rows.lower_bound({job_id, INT64_MIN});
       it != rows.end() && it->first.first == job_id; ++it) {
    it->second.released = true;
    it->second.a.job_token.clear();
  }
  return Status::Ok();
}

Status MemoryAllocationStore::DeleteForJob(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.allocations.get();
  auto first = all.lower_bound({job_id, INT64_MIN});
  if (first == all.end() || first->first.first != job_id) return Status::Ok();
  auto& rows = tx_.tables.allocations.mut();
  rows.erase(rows.lower_bound({job_id, INT64_MIN}), rows.upper_bound({job_id, INT64_MAX}));
  return Status::Ok();
}

}  // namespace controlplane::testing
