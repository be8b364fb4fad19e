#include "controlplane/service/metrics_history.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "common/parse_int.h"
#include "common/time_util.h"

namespace controlplane::service {

using nlohmann::json;

int64_t StepStride(int64_t step) {
  int64_t stride = 1;
  while (step > kKeepEveryStepUpTo * stride && stride < (int64_t{1} << 40)) stride *= 2;
  return stride;
}

bool KeepStep(int64_t step) { return step % StepStride(step) == 0; }

std::optional<int64_t> StepOf(const json& data) {
  if (!data.is_object()) return std::nullopt;
  auto it = data.find("step");
  if (it == data.end() || !it->is_number()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  const double v = std::floor(it->get<double>());
  if (!(v > -9e18 && v < 9e18)) return std::nullopt;
  return static_cast<int64_t>(v);
}

namespace {

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > kMaxSeriesNameLength) return false;
  for (char c : n) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<MetricsRequest> ParseMetricsRequest(const std::string& names, const std::string& since,
                                           const std::string& max_points) {
  MetricsRequest r;
  size_t start = 0;
  while (!names.empty() && start <= names.size()) {
    size_t comma = names.find(',', start);
    std::string n =
        names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!ValidName(n)) {
      return common::InvalidArgument("each name must be 1-64 characters of [A-Za-z0-9_]", "names");
    }
    if (std::find(r.names.begin(), r.names.end(), n) == r.names.end()) r.names.push_back(n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (r.names.size() > kMaxSeriesNames) {
    return common::InvalidArgument("at most 32 names", "names");
  }
  if (!since.empty()) {
    if (auto step = common::ParseInt64(since); step.ok()) {
      r.query.since_step = *step;
    } else if (auto ms = common::ParseUtcTime(since)) {
      r.query.since_ms = *ms;
    } else {
      return common::InvalidArgument("must be a step or an RFC 3339 UTC time", "since");
    }
  }
  r.query.max_points = kDefaultMaxPoints;
  if (!max_points.empty()) {
    auto n = common::ParseInt64(max_points, 1, kMaxMaxPoints, "max_points");
    if (!n.ok()) return n.status();
    r.query.max_points = static_cast<int>(*n);
  }
  return r;
}

json BuildSeries(const std::vector<std::string>& names, const std::vector<StepSample>& samples) {
  std::vector<std::string> wanted = names;
  if (wanted.empty()) {
    std::set<std::string> seen;
    for (const StepSample& s : samples) {
      if (!s.data.is_object()) continue;
      for (const auto& [k, v] : s.data.items()) {
        if (k == "step" || !v.is_number() || !ValidName(k) || seen.count(k)) continue;
        if (seen.size() >= kMaxDefaultSeries) break;
        seen.insert(k);
      }
    }
    wanted.assign(seen.begin(), seen.end());
  }
  json series = json::object();
  for (const std::string& name : wanted) {
    json points = json::array();
    for (const StepSample& s : samples) {
      if (!s.data.is_object()) continue;
      auto it = s.data.find(name);
      if (it == s.data.end() || !it->is_number()) continue;
      points.push_back({s.step, s.time_ms, it->get<double>()});
    }
    series[name] = std::move(points);
  }
  return {{"series", std::move(series)}};
}

}  // namespace controlplane::service
