#include "cli/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "common/time_util.h"

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

namespace {

// A number the step event holds (null or absent: none, e.g. no episode ended in an rl update).
const nlohmann::json* NumberIn(const nlohmann::json& step, const char* key) {
  auto it = step.find(key);
  return it != step.end() && it->is_number() ? &*it : nullptr;
}

// What a step event says, for its kind: a training step's loss and tokens/s; an rl update's
// mean return, success rate and env steps/s; and the closed-loop evaluation where there is one.
// Fields the event lacks are left out rather than shown as 0.
std::string StepDetail(const nlohmann::json& step, long s, long total) {
  char buf[96];
  const bool rl = NumberIn(step, "env_steps_per_s") != nullptr;
  // A job that does not say how many steps it runs (a command job's own script) shows its step.
  if (total > 0) {
    std::snprintf(buf, sizeof(buf), rl ? "update %ld/%ld" : "step %ld/%ld", s, total);
  } else {
    std::snprintf(buf, sizeof(buf), rl ? "update %ld" : "step %ld", s);
  }
  std::string out = buf;
  auto add = [&](const char* format, double v) {
    std::snprintf(buf, sizeof(buf), format, v);
    out += "  ";
    out += buf;
  };
  if (auto* v = NumberIn(step, "loss")) add("loss %.4f", v->get<double>());
  if (auto* v = NumberIn(step, "mean_return")) add("return %.3f", v->get<double>());
  if (auto* v = NumberIn(step, "success_rate")) add("success %.0f%%", 100 * v->get<double>());
  if (auto* v = NumberIn(step, "tokens_per_s")) {
    out += "  " + HumanNumber(v->get<double>()) + " tok/s";
  }
  if (auto* v = NumberIn(step, "env_steps_per_s")) {
    out += "  " + HumanNumber(v->get<double>()) + " env steps/s";
  }
  if (auto* v = NumberIn(step, "eval_success_rate")) {
    add("eval success %.0f%%", 100 * v->get<double>());
  }
  return out;
}

}  // namespace

namespace {

// `step`: the last step event's data, or nullptr before the first.
std::string ProgressLineOf(const std::string& state, const nlohmann::json* step,
                           const std::string& reason, int width) {
  double frac = 0.0;
  std::string detail;
  if (step) {
    long s = step->value("step", 0L), total = step->value("steps", 0L);
    if (total > 0) frac = std::clamp(static_cast<double>(s) / total, 0.0, 1.0);
    detail = StepDetail(*step, s, total);
  } else if (!reason.empty()) {
    detail = reason;
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

}  // namespace

std::string ProgressLine(const nlohmann::json& job, int width) {
  const nlohmann::json* step = nullptr;
  if (job.contains("last_step") && job["last_step"].is_object()) step = &job["last_step"];
  std::string reason;
  if (job.contains("reason") && job["reason"].is_string()) {
    reason = job["reason"].get<std::string>();
  }
  return ProgressLineOf(job.value("state", "?"), step, reason, width);
}

std::string ProgressLine(const api::v1::Job& job, int width) {
  const nlohmann::json* step =
      job.last_step && job.last_step->is_object() ? &*job.last_step : nullptr;
  return ProgressLineOf(job.state, step, job.reason, width);
}

std::string LaunchPhasesTable(const nlohmann::json& job) {
  auto lp = job.find("launch_phases");
  if (lp == job.end() || !lp->is_object() || !lp->contains("phases")) return "";
  static const std::map<std::string, std::string> kWhat = {
      {"queued", "submitted -> placed by the scheduler"},
      {"dispatch", "placed -> launch handed to the node"},
      {"sandbox", "node: launch received -> sandbox prepared (uid, dirs, cgroup)"},
      {"spawn", "node: -> launcher started"},
      {"run", "node: -> exited"},
      {"cleanup", "node: -> slot freed (leftovers killed, logs collected)"},
      {"report", "node: -> end put in a heartbeat"},
      {"transit", "launch and report on the network, server's own work"}};
  std::string head = "launch of attempt " + lp->value("attempt", nlohmann::json(0)).dump();
  if (lp->contains("node") && (*lp)["node"].is_string() && !(*lp)["node"].empty()) {
    head += " on " + (*lp)["node"].get<std::string>();
  }
  if ((*lp).contains("total_ms") && (*lp)["total_ms"].is_number_integer()) {
    head += ": " + (*lp)["total_ms"].dump() + " ms from submission to exit stored";
  } else {
    head += ": not ended yet";
  }
  std::vector<std::vector<std::string>> rows = {{"PHASE", "MS", "WHAT"}};
  for (const auto& ph : (*lp)["phases"]) {
    if (!ph.is_object()) continue;
    const std::string name = ph.value("phase", "");
    auto what = kWhat.find(name);
    rows.push_back({name, ph.contains("ms") ? ph["ms"].dump() : "-",
                    what == kWhat.end() ? "" : what->second});
  }
  return head + "\n" + FormatTable(rows);
}

std::string MetricsTable(const nlohmann::json& reply) {
  const nlohmann::json& series = reply.value("series", nlohmann::json::object());
  std::vector<std::string> names;
  // step -> (time_ms, value per column)
  std::map<int64_t, std::pair<int64_t, std::vector<std::string>>> rows;
  for (const auto& [name, points] : series.items()) {
    const size_t col = names.size();
    names.push_back(name);
    for (const auto& p : points) {
      if (!p.is_array() || p.size() != 3) continue;
      auto& row = rows[p[0].get<int64_t>()];
      row.first = p[1].get<int64_t>();
      row.second.resize(col + 1, "-");
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.6g", p[2].get<double>());
      row.second[col] = buf;
    }
  }
  std::vector<std::vector<std::string>> table = {{"STEP", "TIME"}};
  for (const auto& n : names) table[0].push_back(n);
  for (auto& [step, row] : rows) {
    row.second.resize(names.size(), "-");
    std::vector<std::string> line = {std::to_string(step)};
    const time_t secs = static_cast<time_t>(row.first / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char t[32];
    std::strftime(t, sizeof(t), "%H:%M:%S", &tm);
    line.push_back(t);
    line.insert(line.end(), row.second.begin(), row.second.end());
    table.push_back(std::move(line));
  }
  return FormatTable(table);
}

std::string EvaluationTable(const api::v1::Evaluation& reply) {
  if (reply.tasks.empty()) return "no evaluation results yet\n";
  auto number = [](double v, const char* format) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), format, v);
    return std::string(buf);
  };
  std::vector<std::vector<std::string>> table = {
      {"TASK", "EPISODES", "SUCCESSES", "SUCCESS_RATE", "MEAN_RETURN", "POLICY", "STEP"}};
  for (const api::v1::EvaluationTask& t : reply.tasks) {
    table.push_back({t.task, std::to_string(t.episodes), std::to_string(t.successes),
                     number(t.success_rate, "%.3f"), number(t.mean_return, "%.3f"),
                     t.policy + (t.fp8 ? " (fp8)" : ""), std::to_string(t.checkpoint_step)});
  }
  return FormatTable(table);
}

std::string RefusalText(const common::Status& s) {
  const std::string& field = s.field();
  if (field.empty() || s.message().find(field) != std::string::npos) {
    return field.empty() ? s.message() : s.message() + " (field " + field + ")";
  }
  return field + ": " + s.message();
}

std::string EvalEventLine(const nlohmann::json& data) {
  char buf[256];
  if (data.contains("action_mse")) {
    std::snprintf(buf, sizeof(buf),
                  "evaluation: action MSE %.4f vs %.4f for zero actions (%d held-out samples, "
                  "%d Euler steps)\n",
                  data.value("action_mse", 0.0), data.value("zero_action_mse", 0.0),
                  data.value("samples", 0), data.value("euler_steps", 0));
    return buf;
  }
  const nlohmann::json& tasks = data.value("tasks", nlohmann::json::array());
  if (!tasks.is_array() || tasks.empty()) return "";
  std::string line = "evaluation:";
  for (size_t i = 0; i < tasks.size(); ++i) {
    const nlohmann::json& t = tasks[i];
    if (!t.is_object()) continue;
    std::snprintf(buf, sizeof(buf), "%s %s %.3f (%d/%d)", i > 0 ? "," : "",
                  t.value("task", std::string("?")).c_str(), t.value("success_rate", 0.0),
                  t.value("successes", 0), t.value("episodes", 0));
    line += buf;
  }
  return line + "\n";
}

std::string TimeText(const std::optional<int64_t>& ms) {
  return ms ? common::FormatTimeMillis(*ms) : "-";
}

}  // namespace cli
