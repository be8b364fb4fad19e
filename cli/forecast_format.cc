#include "cli/forecast_format.h"

#include "cli/format.h"
#include "cli/plan_format.h"
#include "common/time_util.h"

namespace cli {

using nlohmann::json;

namespace {

std::string Duration(const std::optional<double>& seconds) {
  return HumanDuration(seconds ? json(*seconds) : json(nullptr));
}

}  // namespace

std::string ForecastText(const api::v1::Forecast& f) {
  std::string out = "admitted (dry run: nothing submitted)\n";
  std::string where;
  if (f.start && f.start->placement) {
    for (const api::v1::ForecastNode& n : f.start->placement->nodes) {
      where += (where.empty() ? "" : ", ") + n.node + " (" + std::to_string(n.ranks) + " ranks)";
    }
  }
  if (f.start && f.start->starts_now) {
    out += "start:  now, on " + where + "\n";
  } else if (f.start && f.start->start_ms) {
    out += "start:  " + TimeText(f.start->start_ms) + " (in " + Duration(f.start->wait_seconds) +
           "), on " + where + "\n";
  } else {
    out += "start:  unknown\n";
  }
  out += "run:    " + Duration(f.run_seconds);
  if (f.run_seconds) out += " (" + f.run_time_source.value_or("-") + ")";
  out += "\nend:    " + TimeText(f.end_ms) + "\n";
  if (!f.reasons.empty()) {
    out += "why:\n";
    for (const std::string& r : f.reasons) out += "  - " + r + "\n";
  }
  return out;
}

}  // namespace cli
