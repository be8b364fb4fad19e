// The steps column of a pipeline (pipeline_store.h), one JSON shape for both stores.
#include "controlplane/service/pipeline_store.h"

namespace controlplane::service {

using nlohmann::json;

bool IsFinalStepState(const std::string& state) {
  return state == kStepSucceeded || state == kStepFailed || state == kStepGateFailed ||
         state == kStepSkipped || state == kStepCancelled;
}

namespace {
json OptMs(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
std::optional<int64_t> MsOf(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
  return j[key].get<int64_t>();
}
}  // namespace

json StepsToJson(const std::vector<PipelineStepState>& steps) {
  json out = json::array();
  for (const PipelineStepState& s : steps) {
    out.push_back({{"name", s.name},
                   {"state", s.state},
                   {"reason", s.reason},
                   {"jobs", s.jobs},
                   {"dataset_id", s.dataset_id},
                   {"submitting", s.submitting},
                   {"gate", s.gate},
                   {"started_ms", OptMs(s.started_ms)},
                   {"finished_ms", OptMs(s.finished_ms)}});
  }
  return out;
}

std::vector<PipelineStepState> StepsFromJson(const json& j) {
  std::vector<PipelineStepState> out;
  if (!j.is_array()) return out;
  for (const json& e : j) {
    if (!e.is_object()) continue;
    PipelineStepState s;
    s.name = e.value("name", "");
    s.state = e.value("state", std::string(kStepPending));
    s.reason = e.value("reason", "");
    if (e.contains("jobs") && e["jobs"].is_array()) {
      for (const json& id : e["jobs"]) {
        if (id.is_number_integer()) s.jobs.push_back(id.get<int64_t>());
      }
    }
    s.dataset_id = e.value("dataset_id", int64_t{0});
    s.submitting = e.value("submitting", json());
    s.gate = e.value("gate", json());
    s.started_ms = MsOf(e, "started_ms");
    s.finished_ms = MsOf(e, "finished_ms");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace controlplane::service
