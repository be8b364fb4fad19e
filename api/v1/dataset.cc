#include "api/v1/dataset.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

Dataset ReadDataset(FieldReader& r) {
  Dataset d;
  d.id = r.Int("id");
  d.tenant_id = r.Int("tenant_id");
  d.tenant = r.String("tenant");
  d.name = r.String("name");
  d.version = r.Int32("version");
  d.state = r.String("state");
  if (const json* s = r.Object("source")) d.source = *s;
  d.episodes = r.Int("episodes");
  d.frames = r.Int("frames");
  d.bytes = r.Int("bytes");
  d.path = r.String("path");
  d.job_id = r.NullableInt("job_id");
  d.error = r.String("error");
  d.received_bytes = r.OptionalInt("received_bytes").value_or(0);
  d.created_ms = r.Time("created_at");
  d.updated_ms = r.Time("updated_at");
  d.directory_removed = r.OptionalBool("directory_removed");
  return d;
}

DatasetDetail ReadDetail(FieldReader& r) {
  DatasetDetail d;
  d.dataset = ReadDataset(r);
  const json* m = r.NullableObject("manifest");
  d.manifest = m != nullptr ? *m : json(nullptr);
  d.progress = r.NullableNumber("progress");
  return d;
}

DatasetList ReadList(FieldReader& r) {
  DatasetList l;
  l.datasets = ReadArray<Dataset>(r, "datasets", ReadDataset);
  l.next_cursor = r.NullableString("next_cursor");
  return l;
}

}  // namespace

json ToJson(const Dataset& d) {
  json out{{"id", d.id},
           {"tenant_id", d.tenant_id},
           {"tenant", d.tenant},
           {"name", d.name},
           {"version", d.version},
           {"state", d.state},
           {"source", d.source},
           {"episodes", d.episodes},
           {"frames", d.frames},
           {"bytes", d.bytes},
           {"path", d.path},
           {"job_id", OrNull(d.job_id)},
           {"error", d.error},
           {"received_bytes", d.received_bytes},
           {"created_at", common::FormatTimeMillis(d.created_ms)},
           {"updated_at", common::FormatTimeMillis(d.updated_ms)}};
  if (d.directory_removed) out["directory_removed"] = *d.directory_removed;
  return out;
}

json ToJson(const DatasetDetail& d) {
  json out = ToJson(d.dataset);
  out["manifest"] = d.manifest;
  out["progress"] = OrNull(d.progress);
  return out;
}

json ToJson(const DatasetList& l) {
  json datasets = json::array();
  for (const Dataset& d : l.datasets) datasets.push_back(ToJson(d));
  return {{"datasets", std::move(datasets)},
          {"next_cursor", OrNull(l.next_cursor)}};
}

json ToJson(const DatasetUploadProgress& p) {
  return {{"id", p.id}, {"received_bytes", p.received_bytes}};
}

common::Result<Dataset> ParseDataset(const json& j) {
  return ReadDocument<Dataset>(j, ReadDataset);
}

common::Result<DatasetDetail> ParseDatasetDetail(const json& j) {
  return ReadDocument<DatasetDetail>(j, ReadDetail);
}

common::Result<DatasetList> ParseDatasetList(const json& j) {
  return ReadDocument<DatasetList>(j, ReadList);
}

common::Result<DatasetUploadProgress> ParseDatasetUploadProgress(const json& j) {
  return ReadDocument<DatasetUploadProgress>(j, [](FieldReader& r) {
    return DatasetUploadProgress{r.Int("id"), r.Int("received_bytes")};
  });
}

}  // namespace api::v1
