// The in-memory twin's dataset versions and job bindings (service/dataset_store.h), with
// db/dataset_store.cc's orderings and constraints: versions count up per (tenant, name) over
// every row, deleted ones included; the state is one of the five the table's CHECK allows; a
// (job, dataset) pair is bound once (job_datasets' primary key); references to tenants, jobs and
// datasets must point somewhere.
#include <algorithm>

#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::DatasetRecord;

namespace {

bool KnownState(const std::string& s) {
  return s == service::kDatasetUploading || s == service::kDatasetImporting || s == service::kDatasetReady ||
         s == service::kDatasetFailed || s == service::kDatasetDeleted;
}

bool Ended(api::JobState s) {
  return s == api::JobState::kSucceeded || s == api::JobState::kFailed ||
         s == api::JobState::kCancelled;
}

}  // namespace

DatasetRecord MemoryDatasetStore::Read(const DatasetRecord& row) const {
  DatasetRecord d = row;
  d.tenant = TenantName(tx_.tables, row.tenant_id);
  return d;
}

Result<DatasetRecord> MemoryDatasetStore::Insert(const DatasetRecord& d, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(d.name));
  EMBODY_RETURN_IF_ERROR(tx_.Text(d.path));
  EMBODY_ASSIGN_OR_RETURN(source, tx_.Jsonb(d.source));
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.tenants.get().count(d.tenant_id) > 0, "dataset's tenant"));
  int version = 0;
  for (const auto& [id, row] : tx_.tables.datasets.get()) {
    if (row.tenant_id == d.tenant_id && row.name == d.name)
      version = std::max(version, row.version);
  }
  DatasetRecord row;
  row.id = ++tx_.seq.datasets;
  row.tenant_id = d.tenant_id;
  row.token_id = d.token_id;
  row.name = d.name;
  row.version = version + 1;
  row.state = d.state == service::kDatasetUploading ? service::kDatasetUploading
                                                    : service::kDatasetImporting;
  row.source = std::move(source);
  row.manifest = nullptr;
  row.path = d.path;
  row.created_ms = row.updated_ms = now_ms;
  tx_.tables.datasets.mut().emplace(row.id, row);
  // As PostgreSQL's RETURNING is used: the caller's record with id, version, state and times.
  DatasetRecord out = d;
  out.id = row.id;
  out.version = row.version;
  out.state = row.state;
  out.created_ms = out.updated_ms = now_ms;
  return out;
}

Result<std::optional<DatasetRecord>> MemoryDatasetStore::Get(int64_t id,
                                                             std::optional<int64_t> tenant_id,
                                                             bool /*for_update*/) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.datasets.get();
  auto it = all.find(id);
  if (it == all.end() || (tenant_id && it->second.tenant_id != *tenant_id)) {
    return std::optional<DatasetRecord>();
  }
  return std::optional<DatasetRecord>(Read(it->second));
}

Result<std::optional<DatasetRecord>> MemoryDatasetStore::GetByJob(int64_t job_id,
                                                                  bool /*for_update*/) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const auto& [id, row] : tx_.tables.datasets.get()) {
    if (row.job_id && *row.job_id == job_id) return std::optional<DatasetRecord>(Read(row));
  }
  return std::optional<DatasetRecord>();
}

Result<std::optional<DatasetRecord>> MemoryDatasetStore::Find(int64_t tenant_id,
                                                              const std::string& name,
                                                              std::optional<int> version) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const DatasetRecord* best = nullptr;
  for (const auto& [id, row] : tx_.tables.datasets.get()) {
    if (row.tenant_id != tenant_id || row.name != name) continue;
    if (version) {
      if (row.version == *version) return std::optional<DatasetRecord>(Read(row));
      continue;
    }
    if (row.state == service::kDatasetReady && (!best || row.version > best->version)) best = &row;
  }
  if (!best) return std::optional<DatasetRecord>();
  return std::optional<DatasetRecord>(Read(*best));
}

Result<std::vector<DatasetRecord>> MemoryDatasetStore::List(const service::DatasetQuery& q) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<DatasetRecord> out;
  const auto& all = tx_.tables.datasets.get();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {  // newest (highest id) first
    const DatasetRecord& row = it->second;
    if (q.tenant_id && row.tenant_id != *q.tenant_id) continue;
    if (!q.name.empty() && row.name != q.name) continue;
    if (!q.include_deleted && row.state == service::kDatasetDeleted) continue;
    if (q.before_id && row.id >= *q.before_id) continue;
    if (static_cast<int64_t>(out.size()) >= std::max(q.limit, 0)) break;
    out.push_back(Read(row));
  }
  return out;
}

Status MemoryDatasetStore::Update(const DatasetRecord& d, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(d.state));
  EMBODY_RETURN_IF_ERROR(tx_.Text(d.path));
  EMBODY_RETURN_IF_ERROR(tx_.Text(d.error));
  nlohmann::json manifest = nullptr;
  if (!d.manifest.is_null()) {
    EMBODY_ASSIGN_OR_RETURN(m, tx_.Jsonb(d.manifest));
    manifest = std::move(m);
  }
  if (!KnownState(d.state)) {
    return tx_.Fail(
        common::Internal("memory database: datasets_state_check violated by \"" + d.state + "\""));
  }
  if (d.job_id) {
    EMBODY_RETURN_IF_ERROR(
        tx_.Reference(tx_.tables.jobs.get().count(*d.job_id) > 0, "dataset's import job"));
  }
  if (d.received_bytes < 0) {
    return tx_.Fail(common::Internal(
        "memory database: datasets_received_bytes_check violated by " +
        std::to_string(d.received_bytes)));
  }
  if (!tx_.tables.datasets.get().count(d.id)) return Status::Ok();  // UPDATE of no row
  DatasetRecord& row = tx_.tables.datasets.mut().at(d.id);
  row.state = d.state;
  row.manifest = std::move(manifest);
  row.episodes = d.episodes;
  row.frames = d.frames;
  row.bytes = d.bytes;
  row.path = d.path;
  row.job_id = d.job_id;
  row.error = d.error;
  row.received_bytes = d.received_bytes;
  row.updated_ms = now_ms;
  return Status::Ok();
}

Status MemoryDatasetStore::BindJob(int64_t job_id, int64_t dataset_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Reference(tx_.tables.jobs.get().count(job_id) > 0, "bound job"));
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.datasets.get().count(dataset_id) > 0, "bound dataset"));
  if (tx_.tables.job_datasets.get().count({job_id, dataset_id})) {
    return tx_.Fail(Status(common::Code::kAlreadyExists,
                           "memory database: job " + std::to_string(job_id) +
                               " already reads dataset " + std::to_string(dataset_id) +
                               " (job_datasets_pkey)"));
  }
  tx_.tables.job_datasets.mut().emplace(job_id, dataset_id);
  return Status::Ok();
}

Result<std::vector<DatasetRecord>> MemoryDatasetStore::AllForJob(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<DatasetRecord> out;  // by dataset id: the set's order
  const auto& bound = tx_.tables.job_datasets.get();
  const auto& all = tx_.tables.datasets.get();
  for (auto b = bound.lower_bound({job_id, INT64_MIN}); b != bound.end() && b->first == job_id;
       ++b) {
    auto it = all.find(b->second);
    if (it != all.end()) out.push_back(Read(it->second));
  }
  return out;
}

Result<std::optional<DatasetRecord>> MemoryDatasetStore::ForJob(int64_t job_id) {
  EMBODY_ASSIGN_OR_RETURN(all, AllForJob(job_id));
  if (all.empty()) return std::optional<DatasetRecord>();
  return std::optional<DatasetRecord>(std::move(all.front()));
}

Result<std::vector<int64_t>> MemoryDatasetStore::LiveJobsReading(int64_t dataset_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<int64_t> ids;  // ascending: the map's order
  const auto& jobs = tx_.tables.jobs.get();
  for (const auto& [job_id, ds] : tx_.tables.job_datasets.get()) {
    if (ds != dataset_id) continue;
    auto j = jobs.find(job_id);
    if (j != jobs.end() && !Ended(j->second.job.state)) ids.push_back(job_id);
  }
  return ids;
}

Result<int64_t> MemoryDatasetStore::BytesForTenant(int64_t tenant_id, int64_t except_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  int64_t n = 0;
  for (const auto& [id, row] : tx_.tables.datasets.get()) {
    if (row.tenant_id != tenant_id || id == except_id) continue;
    int64_t declared = 0;
    if (row.source.contains("upload") && row.source["upload"].is_object() &&
        row.source["upload"].contains("bytes") &&
        row.source["upload"]["bytes"].is_number_integer()) {
      declared = row.source["upload"]["bytes"].get<int64_t>();
    }
    if (row.state == service::kDatasetUploading) n += declared;
    if (row.state == service::kDatasetImporting) n += std::max(row.bytes, declared);
    if (row.state == service::kDatasetReady || row.state == service::kDatasetFailed) {
      n += row.bytes;
    }
  }
  return n;
}

Result<int64_t> MemoryDatasetStore::CountUploading(int64_t tenant_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  int64_t n = 0;
  for (const auto& [id, row] : tx_.tables.datasets.get()) {
    if (row.tenant_id == tenant_id && row.state == service::kDatasetUploading) ++n;
  }
  return n;
}

Result<std::vector<DatasetRecord>> MemoryDatasetStore::StaleUploads(int64_t before_ms, int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<DatasetRecord> out;
  for (const auto& [id, row] : tx_.tables.datasets.get()) {
    if (row.state == service::kDatasetUploading && row.updated_ms < before_ms) {
      out.push_back(Read(row));
    }
  }
  // As the SQL orders: oldest update first, then id.
  std::sort(out.begin(), out.end(), [](const DatasetRecord& a, const DatasetRecord& b) {
    return a.updated_ms != b.updated_ms ? a.updated_ms < b.updated_ms : a.id < b.id;
  });
  if (static_cast<int>(out.size()) > std::max(limit, 0)) out.resize(std::max(limit, 0));
  return out;
}

}  // namespace controlplane::testing
