#include "controlplane/service/dataset_lifecycle.h"

#include <algorithm>

#include "api/dataset_fit.h"
#include "common/log.h"
#include "controlplane/service/storage_quota.h"

namespace controlplane::service {

using nlohmann::json;

namespace {

bool NonNegativeInt(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer() &&
         (j[key].is_number_unsigned() || j[key].get<int64_t>() >= 0);
}

std::string Bounded(std::string s) {
  if (s.size() > kMaxDatasetErrorBytes) s.resize(kMaxDatasetErrorBytes);
  return s;
}

bool IsImageDigest(const json& d) {
  return d.is_string() && d.get<std::string>().rfind("sha256:", 0) == 0 &&
         api::IsSha256Hex(d.get<std::string>().substr(7));
}

}  // namespace

bool IsImage(const DatasetRecord& d) {
  return d.source.is_object() && d.source.value("format", "") == api::kImportFormatOci;
}

Result<int64_t> CheckManifest(const json& m) {
  if (!m.is_object()) return common::InvalidArgument("manifest must be an object", "manifest");
  if (m.dump().size() > kMaxManifestBytes) {
    return common::InvalidArgument("manifest over " + std::to_string(kMaxManifestBytes) + " bytes",
                                   "manifest");
  }
  if (m.value("format", "") == api::kImportFormatOci) {
    // An OCI image (storage/oci_layout.h): its digest names it on every node's cache.
    const json img = m.value("image", json());
    if (!img.is_object() || !IsImageDigest(img.value("digest", json())) ||
        !NonNegativeInt(img, "bytes") || !NonNegativeInt(img, "layers") ||
        img["bytes"].get<int64_t>() > (int64_t{1} << 50)) {
      return common::InvalidArgument(
          "manifest.image needs a sha256:<hex> digest and integer bytes and layers",
          "manifest.image");
    }
    return img["bytes"].get<int64_t>();
  }
  if (!m.contains("stats") || !m["stats"].is_object() || !NonNegativeInt(m["stats"], "episodes") ||
      !NonNegativeInt(m["stats"], "frames")) {
    return common::InvalidArgument("manifest.stats needs integer episodes and frames",
                                   "manifest.stats");
  }
  if (!m.contains("shards") || !m["shards"].is_array()) {
    return common::InvalidArgument("manifest.shards must be an array", "manifest.shards");
  }
  // Training jobs are checked against the keys at submit (ResolveDataset).
  if (auto keys = api::DatasetKeysOf(m); !keys.ok()) {
    return common::InvalidArgument(keys.status().message(), "manifest.keys");
  }
  int64_t bytes = 0;
  for (const json& s : m["shards"]) {
    if (!s.is_object() || !NonNegativeInt(s, "bytes")) {
      return common::InvalidArgument("every shard needs an integer bytes", "manifest.shards");
    }
    const int64_t b = s["bytes"].get<int64_t>();
    if (b > (int64_t{1} << 50) || bytes > (int64_t{1} << 60)) {
      return common::InvalidArgument("shard bytes out of range", "manifest.shards");
    }
    bytes += b;
  }
  return bytes;
}

Status RecordDatasetEvent(UnitOfWork& uow, int64_t job_id, const json& data, int64_t now_ms) {
  EMBODY_ASSIGN_OR_RETURN(found, uow.datasets().GetByJob(job_id, /*for_update=*/true));
  if (!found || found->state != kDatasetImporting || !data.is_object()) return Status::Ok();
  DatasetRecord d = std::move(*found);
  if (data.contains("error") && data["error"].is_string()) {
    d.error = Bounded(data["error"].get<std::string>());
    return uow.datasets().Update(d, now_ms);
  }
  if (!data.contains("manifest")) return Status::Ok();
  const json& m = data["manifest"];
  auto bytes = CheckManifest(m);
  if (bytes.ok() && IsImage(d) != (m.value("format", "") == api::kImportFormatOci)) {
    bytes = common::InvalidArgument(IsImage(d) ? "an image import must report an OCI manifest"
                                               : "a dataset import reported an OCI manifest",
                                    "manifest.format");
  }
  if (!bytes.ok()) {
    // The import job is tenant code: a bad report fails the dataset instead of being stored.
    d.error = Bounded("the import reported a malformed manifest: " + bytes.status().message());
    common::LogWarn("dataset manifest refused",
                    {{"dataset", std::to_string(d.id)}, {"error", bytes.status().message()}});
    return uow.datasets().Update(d, now_ms);
  }
  // Its bytes against the tenant's quota.storage_bytes, under the tenant's row lock (taken only
  // where there is a quota to check): past it the version fails instead of becoming ready.
  EMBODY_ASSIGN_OR_RETURN(tenant, uow.tenants().GetTenant(d.tenant_id, /*for_update=*/false));
  if (tenant && tenant->quota.storage_bytes) {
    EMBODY_ASSIGN_OR_RETURN(locked, uow.tenants().GetTenant(d.tenant_id, /*for_update=*/true));
    Status fits = locked ? CheckStorageQuota(uow, *locked, *bytes, "", d.id) : Status::Ok();
    if (fits.code() == common::Code::kResourceExhausted) {
      // The bytes are on the dataset root all the same: they count until the version is deleted,
      // so imports past the quota cannot pile up uncounted.
      d.bytes = *bytes;
      d.error = Bounded("the import's " + std::to_string(*bytes) +
                        " bytes do not fit the tenant's storage quota: " + fits.message() +
                        "; they count against it until this version is deleted");
      common::LogWarn("dataset refused by the storage quota",
                      {{"dataset", std::to_string(d.id)}, {"error", fits.message()}});
      return uow.datasets().Update(d, now_ms);
    }
    EMBODY_RETURN_IF_ERROR(fits);
  }
  d.manifest = m;
  d.episodes = m["stats"]["episodes"].get<int64_t>();
  d.frames = m["stats"]["frames"].get<int64_t>();
  d.bytes = *bytes;
  return uow.datasets().Update(d, now_ms);
}

Status FinishDatasetImport(UnitOfWork& uow, const JobRecord& job, int64_t now_ms) {
  EMBODY_ASSIGN_OR_RETURN(found, uow.datasets().GetByJob(job.id, /*for_update=*/true));
  if (!found || found->state != kDatasetImporting) return Status::Ok();
  DatasetRecord d = std::move(*found);
  if (job.state == api::JobState::kSucceeded && d.error.empty() && !d.manifest.is_null()) {
    d.state = kDatasetReady;
  } else {
    d.state = kDatasetFailed;
    if (d.error.empty()) {
      d.error = job.state == api::JobState::kSucceeded
                    ? "the import job ended without reporting a manifest"
                    : Bounded("import job " + std::string(api::JobStateName(job.state)) +
                              (job.reason.empty() ? "" : ": " + job.reason));
    }
  }
  return uow.datasets().Update(d, now_ms);
}

namespace {

// The ready version `ref` names in the tenant's datasets: unprocessable on `field` when it has
// none, it was deleted, or it is not ready yet.
Result<DatasetRecord> ReadyVersion(UnitOfWork& uow, int64_t tenant_id, const api::DatasetRef& ref,
                                   const std::string& field) {
  EMBODY_ASSIGN_OR_RETURN(d, uow.datasets().Find(tenant_id, ref.name, ref.version));
  const std::string what = "dataset \"" + ref.name + "\"" +
                           (ref.version ? " version " + std::to_string(*ref.version) : "");
  if (!d || d->state == kDatasetDeleted) {
    return Status(common::Code::kUnprocessable,
                  what + (ref.version ? " not found" : " has no ready version"), field);
  }
  if (d->state != kDatasetReady) {
    return Status(common::Code::kUnprocessable, what + " is " + d->state + ", not ready", field);
  }
  return std::move(*d);
}

}  // namespace

Result<std::optional<DatasetRecord>> ResolveDataset(UnitOfWork& uow, int64_t tenant_id,
                                                    const api::JobSpec& spec) {
  const char* field = "engine.data.dataset";
  if (spec.kind != api::JobKind::kTrain) return std::optional<DatasetRecord>();
  EMBODY_ASSIGN_OR_RETURN(ref, api::ParseDatasetRef(spec.engine.data.dataset, field));
  if (!ref.is_stored()) return std::optional<DatasetRecord>();  // sim: or dir:, nothing to resolve
  EMBODY_ASSIGN_OR_RETURN(d, ReadyVersion(uow, tenant_id, ref, field));
  // The engine would refuse the job when it opens the data (the same rules, api/dataset_fit.h):
  // refuse it now, naming the dataset's side and the spec's field, before it waits in a queue.
  EMBODY_ASSIGN_OR_RETURN(keys, api::DatasetKeysOf(d.manifest));
  const std::string where = "dataset " + ref.name + "@" + std::to_string(d.version);
  auto fit = api::FitDataset(keys, spec.engine.data, spec.engine.model.action_dim, where);
  if (!fit.ok()) return fit.status();
  return std::optional<DatasetRecord>(std::move(d));
}

Result<std::vector<DatasetRecord>> ResolveCommandDatasets(UnitOfWork& uow, int64_t tenant_id,
                                                          const api::JobSpec& spec) {
  std::vector<DatasetRecord> out;
  if (spec.kind != api::JobKind::kCommand) return out;
  if (!spec.image.empty()) {
    const char* field = "environment.image";
    EMBODY_ASSIGN_OR_RETURN(ref, api::ParseDatasetRef(api::kDatasetRefPrefix + spec.image, field));
    EMBODY_ASSIGN_OR_RETURN(d, ReadyVersion(uow, tenant_id, ref, field));
    if (!IsImage(d)) {
      return Status(common::Code::kUnprocessable,
                    "dataset \"" + ref.name + "\" version " + std::to_string(d.version) +
                        " is not an OCI image (upload one with `embody datasets upload NAME "
                        "FILE.tar --format oci`)",
                    field);
    }
    out.push_back(std::move(d));
  }
  for (size_t i = 0; i < spec.datasets.size(); ++i) {
    const std::string field = "datasets[" + std::to_string(i) + "]";
    EMBODY_ASSIGN_OR_RETURN(ref, api::ParseDatasetRef(spec.datasets[i], field));
    EMBODY_ASSIGN_OR_RETURN(d, ReadyVersion(uow, tenant_id, ref, field));
    if (IsImage(d)) {
      return Status(common::Code::kUnprocessable,
                    "dataset \"" + ref.name + "\" is an OCI image: name it as environment.image",
                    field);
    }
    // "dataset:x" and "dataset:x@3" may be the same version: it is bound once.
    const bool seen =
        std::any_of(out.begin(), out.end(), [&](const DatasetRecord& o) { return o.id == d.id; });
    if (!seen) out.push_back(std::move(d));
  }
  return out;
}

Result<json> WithBoundDatasets(UnitOfWork& uow, int64_t job_id, json spec) {
  const bool image = spec.contains("environment") && spec["environment"].is_object() &&
                     spec["environment"].contains("image");
  if (!spec.contains("datasets") && !image) return spec;
  EMBODY_ASSIGN_OR_RETURN(bound, uow.datasets().AllForJob(job_id));
  json dirs = json::object();
  for (const DatasetRecord& d : bound) {
    const std::string name = d.name + "@" + std::to_string(d.version);
    if (!IsImage(d)) {
      dirs[name] = d.path;
    } else if (image && d.manifest.is_object() && d.manifest.contains("image")) {
      spec["environment"]["image"] = {
          {"name", name}, {"path", d.path}, {"digest", d.manifest["image"].value("digest", "")}};
    }
  }
  if (spec.contains("datasets")) spec["datasets"] = std::move(dirs);
  return spec;
}

Result<json> LaunchSpecFor(UnitOfWork& uow, const JobRecord& job) {
  json spec = job.spec;
  if (job.kind == "command") return WithBoundDatasets(uow, job.id, std::move(spec));
  if (job.kind != "train") return spec;
  EMBODY_ASSIGN_OR_RETURN(d, uow.datasets().ForJob(job.id));
  if (d && spec.contains("engine") && spec["engine"].contains("data")) {
    spec["engine"]["data"]["dataset"] = "dir:" + d->path;
  }
  return spec;
}

api::v1::Dataset DatasetView(const DatasetRecord& d) {
  api::v1::Dataset v;
  v.id = d.id;
  v.tenant_id = d.tenant_id;
  v.tenant = d.tenant;
  v.name = d.name;
  v.version = d.version;
  v.state = d.state;
  v.source = d.source;
  v.episodes = d.episodes;
  v.frames = d.frames;
  v.bytes = d.bytes;
  v.path = d.path;
  v.job_id = d.job_id;
  v.error = d.error;
  v.received_bytes = d.received_bytes;
  v.created_ms = d.created_ms;
  v.updated_ms = d.updated_ms;
  return v;
}

}  // namespace controlplane::service
