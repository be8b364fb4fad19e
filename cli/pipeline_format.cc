#include "cli/pipeline_format.h"

#include <cstdio>
#include <vector>

#include "cli/format.h"

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

std::string PipelinesTable(const json& reply) {
  std::vector<std::vector<std::string>> rows{{"ID", "NAME", "STATE", "STEPS", "CREATED", "REASON"}};
  for (const json& p : reply.value("pipelines", json::array())) {
    int done = 0, total = 0;
    for (const json& s : p.value("steps", json::array())) {
      ++total;
      if (s.value("state", "") == "succeeded") ++done;
    }
    rows.push_back({Text(p, "id"), Text(p, "name"), Text(p, "state"),
                    std::to_string(done) + "/" + std::to_string(total), Text(p, "created_at"),
                    Text(p, "reason")});
  }
  return FormatTable(rows);
}

std::string PipelineDryRunText(const json& r) {
  std::string out = "admitted (dry run: nothing submitted): pipeline " + Text(r, "name") +
                    ", expected to end " + Text(r, "predicted_end") + "\n";
  std::vector<std::vector<std::string>> rows = {
      {"STEP", "KIND", "NEEDS", "WAIT S", "RUN S", "START", "END"}};
  std::string notes;
  for (const json& s : r.value("steps", json::array())) {
    std::string needs;
    for (const json& n : s.value("needs", json::array())) {
      needs += (needs.empty() ? "" : ",") + (n.is_string() ? n.get<std::string>() : n.dump());
    }
    const json f = s.value("forecast", json::object());
    auto seconds = [&](const char* key) {
      const json v = f.is_object() ? f.value(key, json(nullptr)) : json(nullptr);
      if (!v.is_number()) return std::string("-");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", v.get<double>());
      return std::string(buf);
    };
    rows.push_back({Text(s, "name"), Text(s, "kind"), needs.empty() ? "-" : needs,
                    seconds("predicted_wait_seconds"), seconds("predicted_run_seconds"),
                    Text(s, "predicted_start"), Text(s, "predicted_end")});
    if (s.contains("not_predicted")) {
      notes += Text(s, "name") + ": not predicted: " + Text(s, "not_predicted") + "\n";
    }
  }
  return out + FormatTable(rows) + notes;
}

std::string PipelineDetail(const json& p) {
  std::string out = "pipeline " + Text(p, "id") + " (" + Text(p, "name") + "): " +
                    Text(p, "state");
  if (!p.value("reason", "").empty()) out += " - " + Text(p, "reason");
  out += "\n\n";
  std::vector<std::vector<std::string>> rows{{"STEP", "STATE", "JOB", "ATTEMPTS", "GATE"}};
  for (const json& s : p.value("steps", json::array())) {
    rows.push_back({Text(s, "name"), Text(s, "state"), Text(s, "job_id"), Text(s, "attempts"),
                    GateCell(s.value("gate", json()))});
  }
  out += FormatTable(rows) + "\n";
  for (const json& s : p.value("steps", json::array())) {
    if (!s.value("reason", "").empty()) out += Text(s, "name") + ": " + Text(s, "reason") + "\n";
  }
  return out;
}

}  // namespace cli
