#include "controlplane/service/datasets_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "common/parse_int.h"
#include "controlplane/service/audit_scope.h"
#include "controlplane/service/dataset_lifecycle.h"
#include "controlplane/service/job_fit.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/roles.h"
#include "controlplane/service/storage_quota.h"

namespace controlplane::service {

using nlohmann::json;

namespace {
constexpr int kMaxListLimit = 500;
constexpr size_t kMaxBodyBytes = 16 * 1024;

Result<DatasetRecord> GetScoped(UnitOfWork& uow, const Principal& p, int64_t id, bool for_update) {
  EMBODY_ASSIGN_OR_RETURN(d, uow.datasets().Get(id, p.TenantScope(), for_update));
  if (!d) return common::NotFound("dataset " + std::to_string(id) + " not found");
  return std::move(*d);
}

// The import job: one rank on one cpu slot, named after the dataset version.
api::JobSpec ImportJobSpec(const DatasetRecord& d, const api::ImportSource& source) {
  api::JobSpec spec;
  std::string base = d.name.substr(0, 100);
  spec.name = "import-" + base + "-v" + std::to_string(d.version);
  spec.kind = api::JobKind::kImport;
  spec.import_dataset_id = d.id;
  spec.import_source = source;
  return spec;
}
}  // namespace

std::string DatasetsService::DirectoryOf(const std::string& root, int64_t tenant_id, int64_t id) {
  return root + "/tenant-" + std::to_string(tenant_id) + "/dataset-" + std::to_string(id);
}

Result<api::v1::Dataset> DatasetsService::Import(const Principal& p, const std::string& body) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kMember, "importing datasets"));
  if (root_.empty()) {
    return common::FailedPrecondition(
        "this server has no dataset root: start embody-server (and every embody-agent) with "
        "--dataset-root DIR on a file system all nodes mount");
  }
  if (body.size() > kMaxBodyBytes) return common::InvalidArgument("request body over 16 KiB");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return common::InvalidArgument("request body must be a JSON object");
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "name" && it.key() != "source") {
      return common::InvalidArgument("unknown field", it.key());
    }
  }
  if (!j.contains("name")) return common::InvalidArgument("is required", "name");
  if (!j["name"].is_string() || !api::IsValidName(j["name"].get<std::string>())) {
    return common::InvalidArgument("must be 1-128 letters, digits, '-', '_' or '.'", "name");
  }
  if (!j.contains("source")) return common::InvalidArgument("is required", "source");
  EMBODY_ASSIGN_OR_RETURN(source, api::ParseImportSource(j["source"], "source"));
  const std::string name = j["name"].get<std::string>();
  if (source.is_pull()) {
    EMBODY_ASSIGN_OR_RETURN(registry,
                            api::FindImageRegistry(registries_, source.registry, "source.registry"));
    source.registry = registry.name;
    source.registry_url = registry.Url();
  }
  if (source.upload) {
    if (!uploads_) {
      return common::FailedPrecondition(
          "this server keeps no dataset uploads: start embody-server with "
          "--dataset-upload-max-gib N (N > 0), or import from a path every node reads");
    }
    return uploads_->Start(p, name, source);
  }

  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  // The tenant's row lock serialises its imports (the next version number) and its admissions.
  EMBODY_ASSIGN_OR_RETURN(tenant, uow->tenants().GetTenant(p.tenant_id, /*for_update=*/true));
  if (!tenant) return common::NotFound("tenant " + std::to_string(p.tenant_id) + " not found");
  // The import's size is known once it ran (its manifest is checked then, RecordDatasetEvent);
  // a tenant already past its storage quota queues none.
  EMBODY_RETURN_IF_ERROR(CheckStorageQuota(*uow, *tenant, 0, "source"));
  const int64_t now = now_();
  DatasetRecord d;
  d.tenant_id = p.tenant_id;
  d.tenant = p.tenant;
  d.token_id = p.token_id;
  d.name = name;
  d.source = api::ToJson(source);
  EMBODY_ASSIGN_OR_RETURN(inserted, uow->datasets().Insert(d, now));
  d = std::move(inserted);
  EMBODY_RETURN_IF_ERROR(QueueImportJob(*uow, p, d, source, root_, now));
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  common::LogInfo("dataset import queued", {{"dataset", std::to_string(d.id)},
                                            {"tenant", p.tenant},
                                            {"job", std::to_string(d.job_id.value_or(0))}});
  if (wake_) wake_();
  return DatasetView(d);
}

Status QueueImportJob(UnitOfWork& uow, const Principal& p, DatasetRecord& d,
                      const api::ImportSource& source, const std::string& root, int64_t now) {
  // The tenant's row lock serialises its admissions (the caller may hold it already).
  EMBODY_ASSIGN_OR_RETURN(tenant, uow.tenants().GetTenant(d.tenant_id, /*for_update=*/true));
  if (!tenant) return common::NotFound("tenant " + std::to_string(d.tenant_id) + " not found");
  // The import job is admitted as any job: the node sizes, and the pending jobs against a quota.
  EMBODY_ASSIGN_OR_RETURN(shapes, uow.nodes().Shapes());
  int64_t pending = 0;
  if (tenant->quota.pending_jobs) {
    EMBODY_ASSIGN_OR_RETURN(n, uow.jobs().PendingCount(d.tenant_id));
    pending = n;
  }
  EMBODY_RETURN_IF_ERROR(CheckAdmission(*tenant, pending, NodeSizes(shapes), api::Resources{}));
  const api::JobSpec spec = ImportJobSpec(d, source);
  NewJob nj;
  nj.tenant_id = d.tenant_id;
  nj.token_id = p.token_id;
  nj.name = spec.name;
  nj.kind = api::JobKindName(spec.kind);
  nj.priority = spec.priority;
  nj.spec = api::ToJson(spec);
  nj.now_ms = now;
  EMBODY_ASSIGN_OR_RETURN(job_id, uow.jobs().Insert(nj));
  EMBODY_ASSIGN_OR_RETURN(ev, uow.events().Append(job_id, now, "state",
                                                  {{"from", nullptr},
                                                   {"to", "PENDING"},
                                                   {"reason", "dataset import"},
                                                   {"actor", p.tenant + "/" + p.token_name}}));
  (void)ev;
  d.state = kDatasetImporting;
  d.job_id = job_id;
  d.path = DatasetsService::DirectoryOf(root, d.tenant_id, d.id);
  EMBODY_RETURN_IF_ERROR(uow.datasets().Update(d, now));
  AuditScope::NoteTarget("dataset " + std::to_string(d.id), d.tenant_id);
  return Status::Ok();
}

Result<api::v1::DatasetList> DatasetsService::List(const Principal& p, int limit,
                                                   const std::string& cursor,
                                                   const std::string& name, int64_t tenant_id) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading datasets"));
  if (limit <= 0 || limit > kMaxListLimit) {
    return common::InvalidArgument("limit must be in 1..500", "limit");
  }
  DatasetQuery q;
  q.tenant_id = p.TenantScope();
  if (tenant_id > 0) {
    // Only a cluster-admin chooses; anyone else asking for another tenant gets an empty page.
    q.tenant_id = p.IsClusterAdmin() || tenant_id == p.tenant_id ? tenant_id : -1;
  }
  if (!name.empty() && !api::IsValidName(name)) {
    return common::InvalidArgument("must be 1-128 letters, digits, '-', '_' or '.'", "name");
  }
  q.name = name;
  q.limit = limit + 1;  // one more tells whether another page exists
  if (!cursor.empty()) {
    auto before = common::ParseInt64(cursor, 1);
    if (!before.ok()) return common::InvalidArgument("bad cursor", "cursor");
    q.before_id = *before;
  }
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(rows, uow->datasets().List(q));
  api::v1::DatasetList out;
  if (static_cast<int>(rows.size()) > limit) {
    rows.resize(limit);
    out.next_cursor = std::to_string(rows.back().id);
  }
  for (const DatasetRecord& d : rows) out.datasets.push_back(DatasetView(d));
  return out;
}

Result<api::v1::DatasetDetail> DatasetsService::Get(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading datasets"));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(d, GetScoped(*uow, p, id, false));
  api::v1::DatasetDetail out{DatasetView(d), d.manifest, std::nullopt};
  if (d.job_id) {
    EMBODY_ASSIGN_OR_RETURN(progress, uow->events().Latest(*d.job_id, "progress"));
    if (progress && progress->data.is_object() && progress->data.contains("fraction") &&
        progress->data["fraction"].is_number()) {
      out.progress = progress->data["fraction"].get<double>();
    }
    if (d.state == kDatasetReady) out.progress = 1.0;
  }
  return out;
}

Result<DatasetsService::DatasetFile> DatasetsService::OpenFile(const Principal& p, int64_t id,
                                                              const std::string& name) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "reading datasets"));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(d, GetScoped(*uow, p, id, false));
  const std::string what = "dataset " + std::to_string(id);
  if (d.state != kDatasetReady) {
    return common::FailedPrecondition(what + " is " + d.state +
                                      "; its files can be read once it is ready");
  }
  // Only the names the manifest gives: a request cannot reach anything else in the directory.
  bool listed = name == "dataset.json";
  if (d.manifest.is_object() && d.manifest.contains("shards") && d.manifest["shards"].is_array()) {
    for (const json& s : d.manifest["shards"]) {
      if (s.is_object() && s.value("file", "") == name) listed = true;
    }
  }
  if (!listed || name.find('/') != std::string::npos || name == "." || name == "..") {
    return common::NotFound(what + " has no file '" + name +
                            "' (its files are dataset.json and the shards its manifest lists)");
  }
  const std::string node_way =
      "; export on a node that mounts the dataset root instead (embody-data export-lerobot " +
      (d.path.empty() ? std::string("DIR") : d.path) + " OUT_DIR)";
  if (root_.empty()) {
    return common::FailedPrecondition("this server has no dataset root (--dataset-root), so it "
                                      "cannot read " + what + "'s files" + node_way);
  }
  if (d.path != DirectoryOf(root_, d.tenant_id, d.id)) {
    return common::FailedPrecondition(what + "'s directory " + d.path +
                                      " is not under this server's dataset root " + root_ +
                                      node_way);
  }
  const std::string path = d.path + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    return common::FailedPrecondition(
        "this server cannot read " + path + " (" + std::strerror(err) +
        "): the dataset root is not mounted on the server, or the file is gone" + node_way);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return common::FailedPrecondition(path + " is not a regular file");
  }
  return DatasetFile{d.tenant_id, std::make_shared<BlobReader>(fd, static_cast<int64_t>(st.st_size))};
}

Result<api::v1::Dataset> DatasetsService::Delete(const Principal& p, int64_t id) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kMember, "deleting datasets"));
  EMBODY_ASSIGN_OR_RETURN(uow, db_.Begin());
  EMBODY_ASSIGN_OR_RETURN(d, GetScoped(*uow, p, id, /*for_update=*/true));
  if (PersonRank(p.role) < PersonRank(kTenantAdmin) && d.token_id != p.token_id) {
    return Status(common::Code::kPermissionDenied,
                  "a member deletes only the datasets its own token imported; ask a tenant-admin");
  }
  if (d.state == kDatasetDeleted) return DatasetView(d);  // deleting twice is the same as once
  if (d.state == kDatasetImporting) {
    return common::FailedPrecondition(
        "dataset " + std::to_string(id) + " is still importing" +
        (d.job_id ? "; cancel job " + std::to_string(*d.job_id) + " first" : ""));
  }
  EMBODY_ASSIGN_OR_RETURN(readers, uow->datasets().LiveJobsReading(id));
  if (!readers.empty()) {
    std::string list;
    for (int64_t r : readers) list += (list.empty() ? "" : ", ") + std::to_string(r);
    return common::FailedPrecondition("dataset " + std::to_string(id) +
                                      " is read by jobs that have not ended: " + list);
  }
  d.state = kDatasetDeleted;
  EMBODY_RETURN_IF_ERROR(uow->datasets().Update(d, now_()));
  AuditScope::NoteTarget("dataset " + std::to_string(d.id), d.tenant_id);
  EMBODY_RETURN_IF_ERROR(uow->Commit());
  if (uploads_) uploads_->files().Remove(d.id);  // an upload's bytes, if any are still here
  // The record is the truth; the directory goes after it, where this server reaches the root.
  // Only a path this server itself derived under its own root is ever removed.
  api::v1::Dataset out = DatasetView(d);
  bool removed = false;
  if (!root_.empty() && d.path == DirectoryOf(root_, d.tenant_id, d.id)) {
    std::error_code ec;
    std::filesystem::remove_all(d.path, ec);
    removed = !ec && !std::filesystem::exists(d.path, ec);
    if (!removed) {
      common::LogWarn("cannot remove a deleted dataset's directory",
                      {{"dataset", std::to_string(id)},
                       {"path", d.path},
                       {"error", ec ? ec.message() : "still there"}});
    }
  }
  out.directory_removed = removed;
  return out;
}

}  // namespace controlplane::service
