#include "api/v1/checkpoint.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

// The object `j` (at `path`) as names to numbers; errors go to `r`.
std::map<std::string, double> ReadMetrics(FieldReader& r, const json& j, const std::string& path) {
  std::map<std::string, double> out;
  for (const auto& [name, v] : j.items()) {
    if (!v.is_number()) {
      r.Note(common::InvalidArgument("must be a number", path + "." + name));
      continue;
    }
    out[name] = v.get<double>();
  }
  return out;
}

Checkpoint ReadCheckpoint(FieldReader& r) {
  Checkpoint c;
  c.id = r.Int("id");
  c.job_id = r.Int("job_id");
  c.step = r.Int("step");
  c.bytes = r.Int("bytes");
  c.sha256 = r.String("sha256");
  if (const json* m = r.Object("metrics")) c.metrics = ReadMetrics(r, *m, r.PathOf("metrics"));
  c.state = r.String("state");
  c.received_bytes = r.Int("received_bytes");
  c.created_ms = r.Time("created_at");
  c.updated_ms = r.Time("updated_at");
  return c;
}

}  // namespace

json ToJson(const Checkpoint& c) {
  json metrics = json::object();
  for (const auto& [name, v] : c.metrics) metrics[name] = v;
  return {{"id", c.id},
          {"job_id", c.job_id},
          {"step", c.step},
          {"bytes", c.bytes},
          {"sha256", c.sha256},
          {"metrics", std::move(metrics)},
          {"state", c.state},
          {"received_bytes", c.received_bytes},
          {"created_at", common::FormatTimeMillis(c.created_ms)},
          {"updated_at", common::FormatTimeMillis(c.updated_ms)}};
}

json ToJson(const CheckpointList& l) {
  json checkpoints = json::array();
  for (const Checkpoint& c : l.checkpoints) checkpoints.push_back(ToJson(c));
  return {{"checkpoints", std::move(checkpoints)}};
}

json ToJson(const CheckpointUploadProgress& p) { return {{"received_bytes", p.received_bytes}}; }

common::Result<Checkpoint> ParseCheckpoint(const json& j) {
  return ReadDocument<Checkpoint>(j, ReadCheckpoint);
}

common::Result<CheckpointList> ParseCheckpointList(const json& j) {
  return ReadDocument<CheckpointList>(j, [](FieldReader& r) {
    return CheckpointList{ReadArray<Checkpoint>(r, "checkpoints", ReadCheckpoint)};
  });
}

common::Result<CheckpointUploadProgress> ParseCheckpointUploadProgress(const json& j) {
  return ReadDocument<CheckpointUploadProgress>(
      j, [](FieldReader& r) { return CheckpointUploadProgress{r.Int("received_bytes")}; });
}

common::Result<std::map<std::string, double>> ParseCheckpointMetrics(const json& j) {
  FieldReader r(j, "metrics");
  std::map<std::string, double> out;
  if (j.is_object()) out = ReadMetrics(r, j, "metrics");
  if (!r.status().ok()) return r.status();
  return out;
}

}  // namespace api::v1
