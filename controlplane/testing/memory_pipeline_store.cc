// The twin's pipelines (service/pipeline_store.h).
#include "controlplane/testing/memory_tables.h"

#include <algorithm>

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::PipelineRecord;

namespace {

// As the PostgreSQL store keeps it: the steps through their JSON column.
PipelineRecord Stored(PipelineRecord p) {
  p.steps = service::StepsFromJson(service::StepsToJson(p.steps));
  return p;
}

}  // namespace

Result<int64_t> MemoryPipelineStore::Insert(const PipelineRecord& p) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.tenants.get().count(p.tenant_id) > 0, "pipelines.tenant_id"));
  EMBODY_RETURN_IF_ERROR(
      tx_.Reference(tx_.tables.tokens.get().count(p.token_id) > 0, "pipelines.token_id"));
  EMBODY_RETURN_IF_ERROR(tx_.Text(p.name));
  EMBODY_RETURN_IF_ERROR(tx_.Text(p.reason));
  EMBODY_RETURN_IF_ERROR(tx_.Text(p.key));
  EMBODY_ASSIGN_OR_RETURN(spec, tx_.Jsonb(p.spec));
  EMBODY_ASSIGN_OR_RETURN(steps, tx_.Jsonb(service::StepsToJson(p.steps)));
  PipelineRecord row = p;
  row.id = ++tx_.seq.pipelines;
  row.spec = std::move(spec);
  row.steps = service::StepsFromJson(steps);
  row.updated_ms = p.created_ms;
  row.finished_ms.reset();
  tx_.tables.pipelines.mut()[row.id] = std::move(row);
  return tx_.seq.pipelines;
}

Result<std::optional<PipelineRecord>> MemoryPipelineStore::Get(int64_t id,
                                                               std::optional<int64_t> tenant_id,
                                                               bool /*for_update*/) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& rows = tx_.tables.pipelines.get();
  auto it = rows.find(id);
  if (it == rows.end() || (tenant_id && it->second.tenant_id != *tenant_id)) {
    return std::optional<PipelineRecord>();
  }
  PipelineRecord p = it->second;
  p.tenant = TenantName(tx_.tables, p.tenant_id);
  return std::optional<PipelineRecord>(std::move(p));
}

Result<std::optional<PipelineRecord>> MemoryPipelineStore::GetByJob(int64_t tenant_id,
                                                                    int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const auto& [id, row] : tx_.tables.pipelines.get()) {
    if (row.tenant_id != tenant_id) continue;
    const bool ran = std::any_of(row.steps.begin(), row.steps.end(), [&](const auto& s) {
      return std::find(s.jobs.begin(), s.jobs.end(), job_id) != s.jobs.end();
    });
    if (!ran) continue;
    PipelineRecord p = row;
    p.tenant = TenantName(tx_.tables, p.tenant_id);
    return std::optional<PipelineRecord>(std::move(p));
  }
  return std::optional<PipelineRecord>();
}

Result<std::vector<PipelineRecord>> MemoryPipelineStore::List(const service::PipelineQuery& q) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<PipelineRecord> out;
  const auto& rows = tx_.tables.pipelines.get();
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (static_cast<int>(out.size()) >= q.limit) break;
    const PipelineRecord& p = it->second;
    if (q.tenant_id && p.tenant_id != *q.tenant_id) continue;
    if (q.before_id && p.id >= *q.before_id) continue;
    PipelineRecord copy = p;
    copy.tenant = TenantName(tx_.tables, p.tenant_id);
    out.push_back(std::move(copy));
  }
  return out;
}

Status MemoryPipelineStore::Update(const PipelineRecord& p, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const std::string& s = p.state;
  if (s != service::kPipelineRunning && s != service::kPipelineCancelling &&
      s != service::kPipelineSucceeded && s != service::kPipelineFailed &&
      s != service::kPipelineCancelled) {
    return tx_.Fail(common::Internal("memory database: pipelines_state_check violated"));
  }
  EMBODY_RETURN_IF_ERROR(tx_.Text(p.reason));
  EMBODY_ASSIGN_OR_RETURN(steps, tx_.Jsonb(service::StepsToJson(p.steps)));
  auto& rows = tx_.tables.pipelines.mut();
  auto it = rows.find(p.id);
  if (it == rows.end()) return Status::Ok();  // UPDATE of no row
  it->second.state = p.state;
  it->second.reason = p.reason;
  it->second.steps = service::StepsFromJson(steps);
  it->second.finished_ms = p.finished_ms;
  it->second.updated_ms = now_ms;
  return Status::Ok();
}

Result<std::vector<int64_t>> MemoryPipelineStore::Active(int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<int64_t> ids;
  for (const auto& [id, p] : tx_.tables.pipelines.get()) {
    if (static_cast<int>(ids.size()) >= limit) break;
    if (p.state == service::kPipelineRunning || p.state == service::kPipelineCancelling) {
      ids.push_back(id);
    }
  }
  return ids;
}

}  // namespace controlplane::testing
