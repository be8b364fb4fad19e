#include "cli/forecast_format.h"

#include "cli/plan_format.h"

namespace cli {

using nlohmann::json;

namespace {

std::string Text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump();
}

}  // namespace

std::string ForecastText(const json& f) {
  std::string out = "admitted (dry run: nothing submitted)\n";
  std::string where;
  if (f.contains("placement") && f["placement"].is_object()) {
    for (const json& n : f["placement"].value("nodes", json::array())) {
      where += (where.empty() ? "" : ", ") + Text(n["node"]) + " (" + Text(n["ranks"]) + " ranks)";
    }
  }
  if (f.value("starts_now", false)) {
    out += "start:  now, on " + where + "\n";
  } else if (!f.value("predicted_start", json()).is_null()) {
    out += "start:  " + Text(f["predicted_start"]) + " (in " +
           HumanDuration(f.value("predicted_wait_seconds", json())) + "), on " + where + "\n";
  } else {
    out += "start:  unknown\n";
  }
  const json run = f.value("predicted_run_seconds", json());
  out += "run:    " + HumanDuration(run);
  if (!run.is_null()) out += " (" + Text(f.value("run_time_source", json())) + ")";
  out += "\nend:    " + Text(f.value("predicted_end", json())) + "\n";
  const json reasons = f.value("reasons", json::array());
  if (!reasons.empty()) {
    out += "why:\n";
    for (const json& r : reasons) out += "  - " + Text(r) + "\n";
  }
  return out;
}

}  // namespace cli
