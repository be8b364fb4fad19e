#include "controlplane/service/dataset_uploads.h"

#include <algorithm>

#include "common/crypto.h"
#include "common/log.h"
#include "controlplane/service/audit_scope.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/datasets_service.h"
#include "controlplane/service/roles.h"
#include "controlplane/service/storage_quota.h"

namespace controlplane::service {

namespace {

Status NotFoundDataset(int64_t id) {
  return common::NotFound("dataset " + std::to_string(id) + " not found");
}

// The upload a version was created with; nullopt for a path import.
std::optional<api::ImportSource> UploadSourceOf(const DatasetRecord& d) {
  auto s = api::ParseImportSource(d.source, "source");
  if (!s.ok() || !s->upload) return std::nullopt;
  return *s;
}

bool PlacedOn(const std::vector<AllocationRecord>& placement, int64_t node_id) {
  for (const AllocationRecord& a : placement) {
    if (a.node_id == node_id) return true;
  }
  return false;
}

}  // namespace

Result<api::v1::Dataset> DatasetUploads::Start(const Principal& p, const std::string& name,
                                               const api::ImportSource& source) {
  if (!source.upload) return common::InvalidArgument("an upload source is required", "source");
  if (source.upload->bytes > limits_.max_bytes) {
    return common::InvalidArgument(
        "an upload of " + std::to_string(source.upload->bytes) + " bytes exceeds this server's " +
            std::to_string(limits_.max_bytes) + "-byte limit (--dataset-upload-max-gib)",
        "source.upload.bytes");
  }
  // Abandoned uploads go first, so they stop counting against the cap below.
  EMBODY_ASSIGN_OR_RETURN(swept, Sweep());
  (void)swept;
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  // The tenant's row lock serialises its creations (the next version) and the cap.
  EMBODY_ASSIGN_OR_RETURN(tenant, uow->tenants().GetTenant(p.tenant_id, /*for_update=*/true));
  if (!tenant) return common::NotFound("tenant " + std::to_string(p.tenant_id) + " not found");
  EMBODY_ASSIGN_OR_RETURN(open, uow->datasets().CountUploading(p.tenant_id));
  if (open >= limits_.max_per_tenant) {
    return Status(common::Code::kResourceExhausted,
                  "tenant " + p.tenant + " has " + std::to_string(open) +
                      " uploads in progress, the most this server allows "
                      "(--dataset-uploads-per-tenant); commit or delete one first");
  }
  // Counted by its declared size from now on, under the same lock.
  EMBODY_RETURN_IF_ERROR(
      CheckStorageQuota(*uow, *tenant, source.upload->bytes, "source.upload.bytes"));
  const int64_t now = now_();
  DatasetRecord d;
  d.tenant_id = p.tenant_id;
  d.tenant = p.tenant;
  d.token_id = p.token_id;
  d.name = name;
  d.state = kDatasetUploading;
  d.source = api::ToJson(source);
  EMBODY_ASSIGN_OR_RETURN(inserted, uow->datasets().Insert(d, now));
  d = std::move(inserted);
  AuditScope::NoteTarget("dataset " + std::to_string(d.id), d.tenant_id);
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo("dataset upload started",
                  {{"dataset", std::to_string(d.id)},
                   {"tenant", p.tenant},
                   {"bytes", std::to_string(source.upload->bytes)}});
  return DatasetView(d);
}

Result<DatasetRecord> DatasetUploads::Writable(UnitOfWork& uow, const Principal& p, int64_t id) {
  // Tokens that are no person's (an agent's, a node's) are refused before anything is looked up.
  if (PersonRank(p.role) == 0) EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kMember, "uploading datasets"));
  EMBODY_ASSIGN_OR_RETURN(found, uow.datasets().Get(id, p.TenantScope(), /*for_update=*/true));
  if (!found || found->state == kDatasetDeleted) return NotFoundDataset(id);
  DatasetRecord d = std::move(*found);
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kMember, "uploading datasets"));
  if (PersonRank(p.role) < PersonRank(kTenantAdmin) && d.token_id != p.token_id) {
    return Status(common::Code::kPermissionDenied,
                  "only the member who started this upload, a tenant-admin or a cluster-admin "
                  "may send its bytes");
  }
  return d;
}

Result<api::v1::DatasetUploadProgress> DatasetUploads::PutChunk(const Principal& p, int64_t id,
                                                                int64_t offset,
                                                                const std::string& chunk_sha256,
                                                                const std::string& data) {
  if (static_cast<int64_t>(data.size()) > limits_.max_chunk_bytes) {
    return common::InvalidArgument("chunk of " + std::to_string(data.size()) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(limits_.max_chunk_bytes));
  }
  if (offset < 0) return common::InvalidArgument("must not be negative", "offset");
  if (!chunk_sha256.empty()) {
    if (!api::IsSha256Hex(chunk_sha256)) {
      return common::InvalidArgument("must be the chunk's SHA-256, 64 lower-case hex characters",
                                     "X-Content-Sha256");
    }
    if (!common::ConstantTimeEquals(common::Sha256Hex(data), chunk_sha256)) {
      return common::InvalidArgument("chunk does not match its SHA-256; nothing stored",
                                     "X-Content-Sha256");
    }
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(d, Writable(*uow, p, id));
  if (d.state != kDatasetUploading) {
    return common::FailedPrecondition("dataset " + std::to_string(id) + " is " + d.state +
                                      ", not uploading");
  }
  auto source = UploadSourceOf(d);
  if (!source) return common::FailedPrecondition("dataset " + std::to_string(id) + " is no upload");
  const int64_t declared = source->upload->bytes;
  const int64_t held = d.received_bytes;
  const int64_t end = offset + static_cast<int64_t>(data.size());
  if (offset > held) {
    return common::FailedPrecondition("offset " + std::to_string(offset) + " leaves a gap: the " +
                                      "server holds " + std::to_string(held) + " bytes");
  }
  if (end > declared) {
    return common::InvalidArgument("chunk ends at byte " + std::to_string(end) +
                                   ", past the declared " + std::to_string(declared));
  }
  size_t skip = 0;
  if (offset < held) {
    // A retry of bytes already held (its answer was lost): they must be the same bytes.
    skip = static_cast<size_t>(std::min(end, held) - offset);
    EMBODY_ASSIGN_OR_RETURN(have, files_.Read(id, offset, skip));
    if (have.size() != skip || have.compare(0, skip, data, 0, skip) != 0) {
      return common::FailedPrecondition("bytes " + std::to_string(offset) + ".." +
                                        std::to_string(offset + static_cast<int64_t>(skip)) +
                                        " differ from those already held; nothing stored");
    }
    if (end <= held) return api::v1::DatasetUploadProgress{id, held};
  }
  EMBODY_RETURN_IF_ERROR(files_.Write(id, held, data.substr(skip)));
  d.received_bytes = end;
  EMBODY_RETURN_IF_ERROR(uow->datasets().Update(d, now_()));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return api::v1::DatasetUploadProgress{id, end};
}

Result<api::v1::Dataset> DatasetUploads::Commit(const Principal& p, int64_t id) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(d, Writable(*uow, p, id));
  auto source = UploadSourceOf(d);
  if (!source) return common::FailedPrecondition("dataset " + std::to_string(id) + " is no upload");
  // A repeated commit whose answer was lost finds the version importing (or past it).
  if (d.state != kDatasetUploading) {
    if (d.job_id) return DatasetView(d);
    return common::FailedPrecondition("dataset " + std::to_string(id) + " is " + d.state +
                                      (d.error.empty() ? "" : ": " + d.error));
  }
  const int64_t declared = source->upload->bytes;
  if (d.received_bytes != declared) {
    return common::FailedPrecondition("dataset " + std::to_string(id) + " holds " +
                                      std::to_string(d.received_bytes) + " of " +
                                      std::to_string(declared) + " bytes");
  }
  EMBODY_ASSIGN_OR_RETURN(digest, files_.DigestOf(id, declared));
  if (digest.bytes != declared || digest.sha256 != source->upload->sha256) {
    common::LogWarn("dataset upload does not match its SHA-256",
                    {{"dataset", std::to_string(id)}, {"sha256", digest.sha256}});
    return Status(common::Code::kUnprocessable,
                  "the uploaded bytes have SHA-256 " + digest.sha256 + ", not the declared " +
                      source->upload->sha256 +
                      "; the upload is kept as it is: delete the version and upload again",
                  "source.upload.sha256");
  }
  const int64_t now = now_();
  EMBODY_RETURN_IF_ERROR(QueueImportJob(*uow, p, d, *source, root_, now));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo("dataset upload committed", {{"dataset", std::to_string(id)},
                                               {"bytes", std::to_string(declared)},
                                               {"job", std::to_string(d.job_id.value_or(0))}});
  if (wake_) wake_();
  return DatasetView(d);
}

Result<DatasetUploadDownload> DatasetUploads::Open(const Principal& p, int64_t id) {
  if (p.role != kNodeRole) {
    return Status(common::Code::kPermissionDenied,
                  "an upload's bytes are read only by the agent that imports them");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(found, uow->datasets().Get(id, std::nullopt, false));
  // Only while its import job runs, and only on a node that job was placed on.
  if (!found || found->state != kDatasetImporting || !found->job_id) return NotFoundDataset(id);
  auto source = UploadSourceOf(*found);
  if (!source) return NotFoundDataset(id);
  EMBODY_ASSIGN_OR_RETURN(placement, uow->allocations().PlacementForJob(*found->job_id));
  if (!PlacedOn(placement, p.node_id)) return NotFoundDataset(id);
  EMBODY_ASSIGN_OR_RETURN(reader, files_.Open(id, source->upload->bytes));
  return DatasetUploadDownload{source->upload->bytes, source->upload->sha256, reader};
}

Result<int> DatasetUploads::Sweep(int limit) {
  std::vector<DatasetRecord> stale;
  {
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_ASSIGN_OR_RETURN(rows, uow->datasets().StaleUploads(now_() - limits_.ttl_ms, limit));
    const int64_t now = now_();
    for (DatasetRecord& d : rows) {
      d.state = kDatasetFailed;
      d.error = "upload abandoned: untouched for " + std::to_string(limits_.ttl_ms / 1000) +
                " s (--dataset-upload-ttl-s)";
      EMBODY_RETURN_IF_ERROR(uow->datasets().Update(d, now));
    }
    EMBODY_RETURN_IF_ERROR(uow->Commit());
    stale = std::move(rows);
  }
  for (const DatasetRecord& d : stale) {
    common::LogInfo("abandoned dataset upload failed",
                    {{"dataset", std::to_string(d.id)}, {"tenant", d.tenant}});
  }
  // Files whose version no longer needs them: the import ended (any outcome), the version was
  // deleted or swept, or the row never committed.
  const std::vector<int64_t> present = files_.List();
  if (present.empty()) return static_cast<int>(stale.size());
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  for (int64_t id : present) {
    EMBODY_ASSIGN_OR_RETURN(d, uow->datasets().Get(id, std::nullopt, false));
    if (d && (d->state == kDatasetUploading || d->state == kDatasetImporting)) continue;
    files_.Remove(id);
  }
  return static_cast<int>(stale.size());
}

}  // namespace controlplane::service
