#include "cli/pipeline_format.h"

#include <cstdio>
#include <vector>

#include "cli/format.h"
#include "common/time_util.h"

namespace cli {

using nlohmann::json;

namespace {

std::string Text(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "-";
  if (j[key].is_string()) return j[key].get<std::string>();
  return j[key].dump();
}

std::string Number(const json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v.get<double>());
  return buf;
}

}  // namespace

std::string GateCell(const json& gate) {
  if (!gate.is_object()) return "-";
  std::string out = Number(gate.value("value", json())) + " >= " +
                    Number(gate.value("threshold", json()));
  if (gate.contains("reference") && gate["reference"].is_object()) {
    const json& r = gate["reference"];
    char minus[32];
    std::snprintf(minus, sizeof minus, "%g", gate.value("minus", 0.0));
    out += " (" + Text(r, "step") + " " + Number(r.value("value", json())) + " - " + minus + ")";
  }
  out += gate.value("passed", false) ? " ok" : " FAILED";
  return out;
}

std::string PipelinesTable(const api::v1::PipelineList& list) {
  std::vector<std::vector<std::string>> rows{{"ID", "NAME", "STATE", "STEPS", "CREATED", "REASON"}};
  for (const api::v1::Pipeline& p : list.pipelines) {
    int done = 0;
    for (const api::v1::PipelineStep& s : p.steps) {
      if (s.state == "succeeded") ++done;
    }
    rows.push_back({std::to_string(p.id), p.name, p.state,
                    std::to_string(done) + "/" + std::to_string(p.steps.size()),
                    common::FormatTimeMillis(p.created_ms), p.reason});
  }
  return FormatTable(rows);
}

std::string PipelineDryRunText(const api::v1::PipelineDryRun& r) {
  std::string out = "admitted (dry run: nothing submitted): pipeline " + r.name +
                    ", expected to end " + TimeText(r.end_ms) + "\n";
  std::vector<std::vector<std::string>> rows = {
      {"STEP", "KIND", "NEEDS", "WAIT S", "RUN S", "START", "END"}};
  std::string notes;
  for (const api::v1::PipelineStepForecast& s : r.steps) {
    std::string needs;
    for (const std::string& n : s.needs) needs += (needs.empty() ? "" : ",") + n;
    auto seconds = [](const std::optional<double>& v) {
      if (!v) return std::string("-");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", *v);
      return std::string(buf);
    };
    const std::optional<double> wait =
        s.forecast && s.forecast->start ? s.forecast->start->wait_seconds : std::nullopt;
    rows.push_back({s.name, s.kind, needs.empty() ? "-" : needs, seconds(wait),
                    seconds(s.forecast ? s.forecast->run_seconds : std::nullopt),
                    TimeText(s.start_ms), TimeText(s.end_ms)});
    if (s.not_predicted) notes += s.name + ": not predicted: " + *s.not_predicted + "\n";
  }
  return out + FormatTable(rows) + notes;
}

std::string PipelineDetail(const api::v1::Pipeline& p) {
  std::string out = "pipeline " + std::to_string(p.id) + " (" + p.name + "): " + p.state;
  if (!p.reason.empty()) out += " - " + p.reason;
  out += "\n\n";
  std::vector<std::vector<std::string>> rows{{"STEP", "STATE", "JOB", "ATTEMPTS", "GATE"}};
  for (const api::v1::PipelineStep& s : p.steps) {
    rows.push_back({s.name, s.state, s.jobs.empty() ? "-" : std::to_string(s.jobs.back()),
                    std::to_string(s.jobs.size()), GateCell(s.gate)});
  }
  out += FormatTable(rows) + "\n";
  for (const api::v1::PipelineStep& s : p.steps) {
    if (!s.reason.empty()) out += s.name + ": " + s.reason + "\n";
  }
  return out;
}

}  // namespace cli
