#include "controlplane/service/checkpoints_service.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/crypto.h"
#include "common/log.h"
#include "controlplane/service/roles.h"
#include "controlplane/service/storage_quota.h"

namespace controlplane::service {

using nlohmann::json;

namespace {

constexpr size_t kMaxStartBody = 16 * 1024;
constexpr size_t kMaxMetrics = 32;
constexpr size_t kMaxMetricName = 64;
constexpr int64_t kMaxStep = int64_t{1} << 50;

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status NotFoundJob(int64_t id) {
  return common::NotFound("job " + std::to_string(id) + " not found");
}

// Metric names as the JobSpec allows them (engine.checkpoint.best.metric); values finite numbers.
Status CheckMetrics(const json& m) {
  if (!m.is_object()) return common::InvalidArgument("must be an object of numbers", "metrics");
  if (m.size() > kMaxMetrics) {
    return common::InvalidArgument("at most " + std::to_string(kMaxMetrics) + " metrics",
                                   "metrics");
  }
  for (const auto& [k, v] : m.items()) {
    bool ok = !k.empty() && k.size() <= kMaxMetricName && k[0] >= 'a' && k[0] <= 'z';
    for (char c : k) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok)
      return common::InvalidArgument("bad metric name \"" + k.substr(0, 64) + "\"", "metrics");
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      return common::InvalidArgument("metric " + k + " must be a finite number", "metrics");
    }
  }
  return Status::Ok();
}

constexpr int64_t kNodeUploadGraceMs = 3600 * 1000;

bool PlacedOn(const std::vector<AllocationRecord>& placement, int64_t node_id) {
  for (const AllocationRecord& a : placement) {
    if (a.node_id == node_id) return true;
  }
  return false;
}

int64_t InitFromOf(const json& spec) {
  auto it = spec.find("init_from");
  return it != spec.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

struct Retention {
  int keep = 3;
  std::string metric;
  bool maximize = false;
};

Retention RetentionOf(const json& spec) {
  Retention r;
  const json* c = nullptr;
  if (spec.contains("engine") && spec["engine"].is_object() &&
      spec["engine"].contains("checkpoint") && spec["engine"]["checkpoint"].is_object()) {
    c = &spec["engine"]["checkpoint"];
  }
  if (!c) return r;
  if (c->contains("keep") && (*c)["keep"].is_number_integer()) {
    r.keep = std::max<int>(1, (*c)["keep"].get<int>());
  }
  if (c->contains("best") && (*c)["best"].is_object()) {
    r.metric = (*c)["best"].value("metric", "");
    r.maximize = (*c)["best"].value("mode", "min") == "max";
  }
  return r;
}

}  // namespace

Result<api::v1::Checkpoint> CheckpointView(const CheckpointBlob& c) {
  auto metrics = api::v1::ParseCheckpointMetrics(c.metrics);
  if (!metrics.ok()) {
    return common::Internal(
        "checkpoint " + std::to_string(c.id) +
        " has stored metrics that are not numbers: " + metrics.status().ToString());
  }
  api::v1::Checkpoint v;
  v.id = c.id;
  v.job_id = c.job_id;
  v.step = c.step;
  v.bytes = c.bytes;
  v.sha256 = c.sha256;
  v.metrics = std::move(*metrics);
  v.state = c.state;
  v.received_bytes = c.received_bytes;
  v.created_ms = c.created_ms;
  v.updated_ms = c.updated_ms;
  return v;
}

Result<JobRecord> CheckpointsService::JobFor(UnitOfWork& uow, const Principal& p, int64_t job_id,
                                             Access access, int64_t checkpoint_id) {
  if (p.role == kNodeRole) {
    if (access == Access::kDelete) {
      return Status(common::Code::kPermissionDenied, "nodes do not delete checkpoints");
    }
    EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(job_id, std::nullopt, false));
    if (!job) return NotFoundJob(job_id);
    if (access == Access::kDownload) {
      // The bytes: only for a job that holds this node now.
      EMBODY_ASSIGN_OR_RETURN(live, uow.allocations().ForJob(job_id));
      if (PlacedOn(live, p.node_id)) return *job;
    } else {
      // Metadata and uploads: the latest attempt's nodes, while the job runs and for an hour
      // after it ended (the agent uploads its last checkpoint after the exit).
      EMBODY_ASSIGN_OR_RETURN(placement, uow.allocations().PlacementForJob(job_id));
      const bool recent = !job->finished_ms || now_() - *job->finished_ms <= kNodeUploadGraceMs;
      if (recent && PlacedOn(placement, p.node_id)) return *job;
    }
    if ((access == Access::kRead || access == Access::kDownload) && checkpoint_id > 0) {
      // A job started from this checkpoint (init_from) runs on this node now: it reads the
      // entry, then the bytes (storage/checkpoint_http_store.h's Get).
      EMBODY_ASSIGN_OR_RETURN(mine, uow.allocations().ForNode(p.node_id));
      for (const AllocationRecord& a : mine) {
        EMBODY_ASSIGN_OR_RETURN(other, uow.jobs().Get(a.job_id, job->tenant_id, false));
        if (other && InitFromOf(other->spec) == checkpoint_id) return *job;
      }
    }
    return NotFoundJob(job_id);
  }
  if (access == Access::kUpload) {
    return Status(common::Code::kPermissionDenied,
                  "checkpoints are uploaded by the agents of the nodes the job runs on");
  }
  const bool reading = access == Access::kRead || access == Access::kDownload;
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, reading ? kViewer : kMember,
                                        reading ? "reading checkpoints" : "deleting checkpoints"));
  EMBODY_ASSIGN_OR_RETURN(job, uow.jobs().Get(job_id, p.TenantScope(), false));
  if (!job) return NotFoundJob(job_id);
  return *job;
}

Result<CheckpointBlob> CheckpointsService::BlobOf(UnitOfWork& uow, const JobRecord& job, int64_t id,
                                                  bool for_update) {
  EMBODY_ASSIGN_OR_RETURN(c, uow.checkpoints().Get(id, for_update));
  if (!c || c->job_id != job.id || c->tenant_id != job.tenant_id) {
    return common::NotFound("checkpoint " + std::to_string(id) + " of job " +
                            std::to_string(job.id) + " not found");
  }
  return *c;
}

Result<api::v1::Checkpoint> CheckpointsService::StartUpload(const Principal& p, int64_t job_id,
                                                            const std::string& body) {
  {
    // Who may comes first: a caller that may not upload here learns nothing from the body's
    // checks and sets off no sweep of abandoned uploads.
    EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
    EMBODY_RETURN_IF_ERROR(JobFor(*uow, p, job_id, Access::kUpload).status());
  }
  if (body.size() > kMaxStartBody) return common::InvalidArgument("request body too large");
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return common::InvalidArgument("body must be a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (k != "step" && k != "bytes" && k != "sha256" && k != "metrics") {
      return common::InvalidArgument("unknown field", k);
    }
  }
  CheckpointBlob c;
  if (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() < 0 ||
      j["step"].get<int64_t>() > kMaxStep) {
    return common::InvalidArgument("must be an integer between 0 and 2^50", "step");
  }
  c.step = j["step"];
  if (!j.contains("bytes") || !j["bytes"].is_number_integer() || j["bytes"].get<int64_t>() < 0) {
    return common::InvalidArgument("must be a non-negative integer", "bytes");
  }
  c.bytes = j["bytes"];
  if (c.bytes > limits_.max_bytes) {
    return common::InvalidArgument("checkpoint of " + std::to_string(c.bytes) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(limits_.max_bytes),
                                   "bytes");
  }
  if (!j.contains("sha256") || !j["sha256"].is_string() || !IsSha256Hex(j["sha256"])) {
    return common::InvalidArgument("must be 64 lower-case hex characters", "sha256");
  }
  c.sha256 = j["sha256"];
  if (j.contains("metrics")) {
    EMBODY_RETURN_IF_ERROR(CheckMetrics(j["metrics"]));
    c.metrics = j["metrics"];
  }
  // Abandoned uploads go first, so they stop counting against the limits below.
  EMBODY_ASSIGN_OR_RETURN(swept, SweepStale());
  (void)swept;
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, JobFor(*uow, p, job_id, Access::kUpload));
  // Serialises the quota check per tenant, as admission does for jobs.
  EMBODY_ASSIGN_OR_RETURN(tenant, uow->tenants().GetTenant(job.tenant_id, /*for_update=*/true));
  if (!tenant) return NotFoundJob(job_id);
  EMBODY_ASSIGN_OR_RETURN(count, uow->checkpoints().CountForJob(job_id));
  if (count >= limits_.max_per_job) {
    return Status(common::Code::kResourceExhausted,
                  "job " + std::to_string(job_id) + " holds " + std::to_string(count) +
                      " checkpoints, the most the server keeps per job");
  }
  EMBODY_ASSIGN_OR_RETURN(used, uow->checkpoints().BytesForTenant(job.tenant_id));
  if (used + c.bytes > limits_.tenant_quota_bytes) {
    return Status(common::Code::kResourceExhausted,
                  "tenant " + job.tenant + " holds " + std::to_string(used) +
                      " bytes of checkpoints; " + std::to_string(c.bytes) + " more exceed its " +
                      std::to_string(limits_.tenant_quota_bytes) + "-byte quota");
  }
  // The tenant's own quota.storage_bytes counts its datasets too: the tighter of the two refuses.
  EMBODY_RETURN_IF_ERROR(CheckStorageQuota(*uow, *tenant, c.bytes, "bytes"));
  c.job_id = job_id;
  c.tenant_id = job.tenant_id;
  c.state = "uploading";
  const int64_t now = now_();
  EMBODY_ASSIGN_OR_RETURN(id, uow->checkpoints().InsertUpload(c, now));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  c.id = id;
  c.created_ms = c.updated_ms = now;
  return CheckpointView(c);
}

Result<api::v1::CheckpointUploadProgress> CheckpointsService::PutChunk(
    const Principal& p, int64_t job_id, int64_t id, int64_t offset, const std::string& chunk_sha256,
    const std::string& data) {
  if (static_cast<int64_t>(data.size()) > limits_.max_chunk_bytes) {
    return common::InvalidArgument("chunk of " + std::to_string(data.size()) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(limits_.max_chunk_bytes));
  }
  if (!IsSha256Hex(chunk_sha256)) {
    return common::InvalidArgument("must be the chunk's SHA-256, 64 lower-case hex characters",
                                   "X-Content-Sha256");
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, JobFor(*uow, p, job_id, Access::kUpload));
  EMBODY_ASSIGN_OR_RETURN(c, BlobOf(*uow, job, id, /*for_update=*/true));
  if (c.state != "uploading") {
    return common::FailedPrecondition("checkpoint " + std::to_string(id) + " is already committed");
  }
  if (offset != c.received_bytes) {
    return common::FailedPrecondition("offset " + std::to_string(offset) + " is not the " +
                                      std::to_string(c.received_bytes) + " bytes held");
  }
  if (offset + static_cast<int64_t>(data.size()) > c.bytes) {
    return common::InvalidArgument("chunk ends past the declared " + std::to_string(c.bytes) +
                                   " bytes");
  }
  if (!common::ConstantTimeEquals(common::Sha256Hex(data), chunk_sha256)) {
    return common::InvalidArgument("chunk does not match its SHA-256; nothing stored",
                                   "X-Content-Sha256");
  }
  EMBODY_RETURN_IF_ERROR(files_.AppendChunk(c, offset, data));
  const int64_t received = offset + static_cast<int64_t>(data.size());
  EMBODY_RETURN_IF_ERROR(uow->checkpoints().SetReceived(id, received, now_()));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  return api::v1::CheckpointUploadProgress{received};
}

Result<std::vector<CheckpointBlob>> CheckpointsService::ApplyRetention(UnitOfWork& uow,
                                                                       const JobRecord& job) {
  const Retention r = RetentionOf(job.spec);
  EMBODY_ASSIGN_OR_RETURN(ready, uow.checkpoints().ListReady(job.id));
  std::set<int64_t> keep;
  for (auto it = ready.rbegin(); it != ready.rend() && static_cast<int>(keep.size()) < r.keep;
       ++it) {
    keep.insert(it->id);
  }
  if (!r.metric.empty()) {
    const CheckpointBlob* best = nullptr;
    for (const CheckpointBlob& c : ready) {  // ascending: a tie goes to the newer
      auto v = c.metrics.find(r.metric);
      if (v == c.metrics.end() || !v->is_number()) continue;
      const double x = v->get<double>();
      if (!best || (r.maximize ? x >= best->metrics[r.metric].get<double>()
                               : x <= best->metrics[r.metric].get<double>())) {
        best = &c;
      }
    }
    if (best) keep.insert(best->id);
  }
  std::vector<CheckpointBlob> dropped;
  for (const CheckpointBlob& c : ready) {
    if (keep.count(c.id)) continue;
    EMBODY_RETURN_IF_ERROR(uow.checkpoints().Delete(c.id));
    dropped.push_back(c);
  }
  return dropped;
}

Result<api::v1::Checkpoint> CheckpointsService::Commit(const Principal& p, int64_t job_id,
                                                       int64_t id, const std::string& body) {
  std::string claimed;
  if (!body.empty()) {
    if (body.size() > kMaxStartBody) return common::InvalidArgument("request body too large");
    json j = json::parse(body, nullptr, false);
    if (!j.is_object()) return common::InvalidArgument("body must be a JSON object");
    if (j.contains("sha256")) {
      if (!j["sha256"].is_string() || !IsSha256Hex(j["sha256"])) {
        return common::InvalidArgument("must be 64 lower-case hex characters", "sha256");
      }
      claimed = j["sha256"];
    }
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, JobFor(*uow, p, job_id, Access::kUpload));
  EMBODY_ASSIGN_OR_RETURN(c, BlobOf(*uow, job, id, /*for_update=*/true));
  if (!claimed.empty() && claimed != c.sha256) {
    return common::InvalidArgument("sha256 differs from the one declared at the start", "sha256");
  }
  if (c.state == "ready") return CheckpointView(c);  // a repeated commit whose reply was lost
  if (c.received_bytes != c.bytes) {
    return common::FailedPrecondition("checkpoint " + std::to_string(id) + " holds " +
                                      std::to_string(c.received_bytes) + " of " +
                                      std::to_string(c.bytes) + " bytes");
  }
  EMBODY_ASSIGN_OR_RETURN(digest, files_.DigestPart(c));
  if (digest.bytes != c.bytes || digest.sha256 != c.sha256) {
    // Not the declared file: discarded whole, never listed.
    EMBODY_RETURN_IF_ERROR(uow->checkpoints().Delete(id));
    EMBODY_RETURN_IF_ERROR(uow->Commit());
    files_.Remove(c);
    common::LogWarn("checkpoint upload discarded: SHA-256 mismatch",
                    {{"job", std::to_string(job_id)}, {"checkpoint", std::to_string(id)}});
    return common::InvalidArgument(
        "the uploaded bytes do not match the declared SHA-256; the "
        "upload is discarded",
        "sha256");
  }
  const int64_t now = now_();
  EMBODY_RETURN_IF_ERROR(uow->checkpoints().MarkReady(id, now));
  EMBODY_ASSIGN_OR_RETURN(dropped, ApplyRetention(*uow, job));
  EMBODY_RETURN_IF_ERROR(files_.Publish(c));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  for (const CheckpointBlob& d : dropped) files_.Remove(d);
  c.state = "ready";
  c.updated_ms = now;
  common::LogInfo("checkpoint stored", {{"job", std::to_string(job_id)},
                                        {"checkpoint", std::to_string(id)},
                                        {"step", std::to_string(c.step)},
                                        {"bytes", std::to_string(c.bytes)},
                                        {"dropped", std::to_string(dropped.size())}});
  return CheckpointView(c);
}

Result<api::v1::CheckpointList> CheckpointsService::List(const Principal& p, int64_t job_id) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, JobFor(*uow, p, job_id, Access::kRead));
  EMBODY_ASSIGN_OR_RETURN(ready, uow->checkpoints().ListReady(job.id));
  api::v1::CheckpointList out;
  for (const CheckpointBlob& c : ready) {
    EMBODY_ASSIGN_OR_RETURN(v, CheckpointView(c));
    out.checkpoints.push_back(std::move(v));
  }
  return out;
}

Result<api::v1::Checkpoint> CheckpointsService::Entry(const Principal& p, int64_t job_id,
                                                      int64_t id) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, JobFor(*uow, p, job_id, Access::kRead, id));
  EMBODY_ASSIGN_OR_RETURN(c, BlobOf(*uow, job, id, false));
  return CheckpointView(c);
}

Result<CheckpointDownload> CheckpointsService::OpenData(const Principal& p, int64_t job_id,
                                                        int64_t id) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, JobFor(*uow, p, job_id, Access::kDownload, id));
  EMBODY_ASSIGN_OR_RETURN(c, BlobOf(*uow, job, id, false));
  if (c.state != "ready") {
    return common::NotFound("checkpoint " + std::to_string(id) + " is not committed");
  }
  EMBODY_ASSIGN_OR_RETURN(reader, files_.Open(c));
  return CheckpointDownload{c, reader};
}

Status CheckpointsService::Delete(const Principal& p, int64_t job_id, int64_t id) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(job, JobFor(*uow, p, job_id, Access::kDelete));
  EMBODY_ASSIGN_OR_RETURN(c, BlobOf(*uow, job, id, true));
  EMBODY_RETURN_IF_ERROR(uow->checkpoints().Delete(id));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  files_.Remove(c);
  return Status::Ok();
}

Result<int> CheckpointsService::SweepStale(int limit) {
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(stale,
                          uow->checkpoints().StaleUploads(now_() - limits_.upload_ttl_ms, limit));
  for (const CheckpointBlob& c : stale) EMBODY_RETURN_IF_ERROR(uow->checkpoints().Delete(c.id));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  for (const CheckpointBlob& c : stale) {
    files_.Remove(c);
    common::LogInfo("abandoned checkpoint upload removed",
                    {{"job", std::to_string(c.job_id)}, {"checkpoint", std::to_string(c.id)}});
  }
  return static_cast<int>(stale.size());
}

Result<api::CheckpointRef> ResumeCheckpointFor(UnitOfWork& uow, const JobRecord& job) {
  EMBODY_ASSIGN_OR_RETURN(latest, uow.checkpoints().LatestReady(job.id));
  std::optional<CheckpointBlob> c = latest;
  if (!c) {
    const int64_t init = InitFromOf(job.spec);
    if (init > 0) {
      EMBODY_ASSIGN_OR_RETURN(from, uow.checkpoints().Get(init, false));
      if (from && from->state == "ready" && from->tenant_id == job.tenant_id) c = from;
    }
  }
  if (!c) return api::CheckpointRef{};
  return api::CheckpointRef{c->id, c->job_id, c->step, c->bytes, c->sha256};
}

Status CheckInitFrom(UnitOfWork& uow, int64_t tenant_id, int64_t id) {
  EMBODY_ASSIGN_OR_RETURN(c, uow.checkpoints().Get(id, false));
  if (!c || c->tenant_id != tenant_id || c->state != "ready") {
    return Status(common::Code::kNotFound, "checkpoint " + std::to_string(id) + " not found",
                  "init_from");
  }
  return Status::Ok();
}

}  // namespace controlplane::service
