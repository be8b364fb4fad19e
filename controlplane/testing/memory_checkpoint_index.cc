// The in-memory twin's index of blob-store checkpoints (service/checkpoint_index.h), with
// db/checkpoint_index.cc's orderings. Blob rows sit in a table of their own here; on PostgreSQL
// they share the checkpoints table with the rows jobs report from their own disks, which none of
// these methods returns.
#include <algorithm>

#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::CheckpointBlob;

Result<int64_t> MemoryCheckpointIndex::InsertUpload(const CheckpointBlob& c, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(c.sha256));
  EMBODY_RETURN_IF_ERROR(tx_.Reference(tx_.tables.jobs.get().count(c.job_id) > 0, "job"));
  EMBODY_ASSIGN_OR_RETURN(metrics, tx_.Jsonb(c.metrics));
  CheckpointBlob row = c;
  row.id = ++tx_.seq.checkpoints;
  row.state = "uploading";
  row.received_bytes = 0;
  row.metrics = std::move(metrics);
  row.created_ms = row.updated_ms = now_ms;
  const int64_t id = row.id;
  tx_.tables.checkpoint_blobs.mut().emplace(id, std::move(row));
  return id;
}

Result<std::optional<CheckpointBlob>> MemoryCheckpointIndex::Get(int64_t id, bool /*for_update*/) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.checkpoint_blobs.get();
  auto it = all.find(id);
  if (it == all.end()) return std::optional<CheckpointBlob>();
  return std::optional<CheckpointBlob>(it->second);
}

Status MemoryCheckpointIndex::SetReceived(int64_t id, int64_t received_bytes, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.checkpoint_blobs.get();
  auto it = all.find(id);
  if (it == all.end() || it->second.state != "uploading") return Status::Ok();
  CheckpointBlob& row = tx_.tables.checkpoint_blobs.mut().at(id);
  row.received_bytes = received_bytes;
  row.updated_ms = now_ms;
  return Status::Ok();
}

Status MemoryCheckpointIndex::MarkReady(int64_t id, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& all = tx_.tables.checkpoint_blobs.get();
  auto it = all.find(id);
  if (it == all.end() || it->second.state != "uploading") return Status::Ok();
  CheckpointBlob& row = tx_.tables.checkpoint_blobs.mut().at(id);
  row.state = "ready";
  row.updated_ms = now_ms;
  return Status::Ok();
}

Status MemoryCheckpointIndex::Delete(int64_t id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (tx_.tables.checkpoint_blobs.get().count(id)) tx_.tables.checkpoint_blobs.mut().erase(id);
  return Status::Ok();
}

std::vector<CheckpointBlob> MemoryCheckpointIndex::Ready(int64_t job_id) const {
  std::vector<CheckpointBlob> out;
  for (const auto& [id, c] : tx_.tables.checkpoint_blobs.get()) {
    if (c.job_id == job_id && c.state == "ready") out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [](const CheckpointBlob& a, const CheckpointBlob& b) {
    return a.step != b.step ? a.step < b.step : a.id < b.id;
  });
  return out;
}

Result<std::vector<CheckpointBlob>> MemoryCheckpointIndex::ListReady(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  return Ready(job_id);
}

Result<std::optional<CheckpointBlob>> MemoryCheckpointIndex::LatestReady(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  auto ready = Ready(job_id);
  if (ready.empty()) return std::optional<CheckpointBlob>();
  return std::optional<CheckpointBlob>(ready.back());
}

Result<int64_t> MemoryCheckpointIndex::CountForJob(int64_t job_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  int64_t n = 0;
  for (const auto& [id, c] : tx_.tables.checkpoint_blobs.get()) n += c.job_id == job_id;
  return n;
}

Result<int64_t> MemoryCheckpointIndex::BytesForTenant(int64_t tenant_id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  int64_t n = 0;
  for (const auto& [id, c] : tx_.tables.checkpoint_blobs.get()) {
    if (c.tenant_id == tenant_id) n += c.bytes;
  }
  return n;
}

Result<std::vector<CheckpointBlob>> MemoryCheckpointIndex::StaleUploads(int64_t before_ms,
                                                                       int limit) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<CheckpointBlob> out;
  for (const auto& [id, c] : tx_.tables.checkpoint_blobs.get()) {
    if (c.state == "uploading" && c.updated_ms < before_ms) out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [](const CheckpointBlob& a, const CheckpointBlob& b) {
    return a.updated_ms < b.updated_ms;
  });
  if (limit >= 0 && static_cast<int>(out.size()) > limit) out.resize(limit);
  return out;
}

}  // namespace controlplane::testing
