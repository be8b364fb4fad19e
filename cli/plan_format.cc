#include "cli/plan_format.h"

#include <cstdio>

#include "cli/format.h"
#include "common/parse_int.h"

namespace cli {

using common::InvalidArgument;
using nlohmann::json;

common::Result<std::vector<int>> ParseGpuList(const std::string& text) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const auto gpus = common::ParseInt(text.substr(start, comma - start), 1, 9'999'999);
    if (!gpus.ok()) {
      return InvalidArgument("must be positive integers separated by commas, got \"" + text + "\"",
                             "--gpus");
    }
    out.push_back(*gpus);
    start = comma + 1;
  }
  return out;
}

common::Result<json> PlanBody(const json& file_json, const std::vector<int>& gpus,
                              const json& cluster_json) {
  if (!file_json.is_object()) return InvalidArgument("JOB file must hold a JSON object");
  json body = file_json.contains("job") ? file_json : json{{"job", file_json}};
  if (!gpus.empty()) body["gpus"] = gpus;
  if (!cluster_json.is_null()) body["cluster"] = cluster_json;
  if (!body.contains("gpus")) return InvalidArgument("give --gpus", "--gpus");
  if (!body.contains("cluster")) return InvalidArgument("give --cluster FILE", "--cluster");
  return body;
}

std::string HumanDuration(const json& seconds) {
  if (!seconds.is_number()) return "-";
  const double s = seconds.get<double>();
  char buf[32];
  if (s < 1.0) {
    std::snprintf(buf, sizeof buf, "%.0f ms", s * 1e3);
  } else if (s < 120.0) {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  } else if (s < 7200.0) {
    std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f h", s / 3600);
  }
  return buf;
}

std::string PlanTable(const api::v1::Plan& plan) {
  std::vector<std::vector<std::string>> rows = {{"GPUS", "NODES", "STEP", "EPOCH", "RUN",
                                                 "TOKENS/S", "EFFICIENCY", "BOTTLENECK",
                                                 "MEM/RANK"}};
  for (const api::v1::PlanSize& s : plan.sizes) {
    char eff[16];
    std::snprintf(eff, sizeof eff, "%.0f%%", 100 * s.efficiency);
    std::string mem = HumanNumber(s.memory_per_rank_bytes) + "B";
    if (!s.fits_memory) mem += " (too big)";
    rows.push_back({std::to_string(s.gpus), std::to_string(s.nodes), HumanDuration(s.step_seconds),
                    HumanDuration(s.epoch_seconds ? json(*s.epoch_seconds) : json(nullptr)),
                    HumanDuration(s.run_seconds), HumanNumber(s.tokens_per_s), eff, s.bottleneck,
                    mem});
  }
  std::string out = FormatTable(rows);
  out += "efficiency vs one node stays >= 50% up to " + std::to_string(plan.efficient_up_to_gpus) +
         " GPUs";
  out += plan.efficiency_below_half_at_gpus
             ? "; below at " + std::to_string(*plan.efficiency_below_half_at_gpus) + "\n"
             : "\n";
  return out;
}

}  // namespace cli
