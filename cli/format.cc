#include "cli/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cli {

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows) {
    if (w.size() < r.size()) w.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(w[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string HumanNumber(double v) {
  const char* suffix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  double a = std::fabs(v);
  while (a >= 1000.0 && i < 4) {
    a /= 1000.0;
    v /= 1000.0;
    ++i;
  }
  char buf[32];
  if (a >= 100 || i == 0) {
    std::snprintf(buf, sizeof(buf), "%.0f%s", v, suffix[i]);
  } else if (a >= 10) {
    std::snprintf(buf, sizeof(buf), "%.1f%s", v, suffix[i]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f%s", v, suffix[i]);
  }
  return buf;
}

std::string ProgressLine(const nlohmann::json& job, int width) {
  std::string state = job.value("state", "?");
  const nlohmann::json* step = nullptr;
  if (job.contains("last_step") && job["last_step"].is_object()) step = &job["last_step"];
  double frac = 0.0;
  std::string detail;
  if (step) {
    long s = step->value("step", 0L), total = step->value("steps", 0L);
    if (total > 0) frac = std::clamp(static_cast<double>(s) / total, 0.0, 1.0);
    char buf[160];
    std::snprintf(buf, sizeof(buf), "step %ld/%ld  loss %.4f  %s tok/s", s, total,
                  step->value("loss", 0.0), HumanNumber(step->value("tokens_per_s", 0.0)).c_str());
    detail = buf;
  } else if (job.contains("reason") && job["reason"].is_string() &&
             !job["reason"].get<std::string>().empty()) {
    detail = job["reason"].get<std::string>();
  }
  if (state == "SUCCEEDED") frac = 1.0;
  int filled = static_cast<int>(std::lround(frac * width));
  std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
  char pct[16];
  std::snprintf(pct, sizeof(pct), "%3d%%", static_cast<int>(std::lround(frac * 100)));
  std::string line = bar + " " + pct + "  " + state;
  if (!detail.empty()) line += "  " + detail;
  return line;
}

}  // namespace cli
