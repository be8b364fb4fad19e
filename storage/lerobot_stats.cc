#include "storage/lerobot_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

namespace storage {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxShownMismatches = 8;
constexpr double kScaleFloor = 1e-6;  // below this a value is zero for the comparison

// LeRobot feature -> our key.
const std::pair<const char*, const char*> kCompared[] = {{"action", "actions"},
                                                         {"observation.state", "obs/state"}};

// A flat array of finite numbers.
bool Numbers(const json& j, std::vector<double>* out) {
  if (!j.is_array()) return false;
  out->clear();
  for (const json& v : j) {
    if (!v.is_number()) return false;
    out->push_back(v.get<double>());
    if (!std::isfinite(out->back())) return false;
  }
  return true;
}

// One feature's stats object; nullopt when it lacks what the comparison needs, an error when
// what it has is malformed.
common::Result<std::optional<LerobotFeatureStats>> ParseFeature(const json& j,
                                                                const std::string& what,
                                                                bool need_count) {
  if (!j.is_object()) return common::InvalidArgument(what + " is not an object");
  for (const char* k : {"min", "max", "mean", "std"}) {
    if (!j.contains(k)) return std::optional<LerobotFeatureStats>();
  }
  LerobotFeatureStats f;
  if (!Numbers(j["min"], &f.min) || !Numbers(j["max"], &f.max) || !Numbers(j["mean"], &f.mean) ||
      !Numbers(j["std"], &f.std)) {
    return common::InvalidArgument(what + ": min, max, mean and std must be arrays of numbers");
  }
  const size_t n = f.mean.size();
  if (n == 0 || f.min.size() != n || f.max.size() != n || f.std.size() != n) {
    return common::InvalidArgument(what + ": min, max, mean and std differ in length");
  }
  std::vector<double> count;
  if (j.contains("count") && Numbers(j["count"], &count) && count.size() == 1 && count[0] > 0) {
    f.count = count[0];
  } else if (need_count) {
    return common::InvalidArgument(what + ": no count (needed to aggregate episodes)");
  }
  return std::optional<LerobotFeatureStats>(std::move(f));
}

// A statistics file is read whole: refuse one past kMaxLerobotStatsBytes before reading it.
common::Status CheckStatsFileSize(const std::string& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return common::InvalidArgument(path + ": " + ec.message());
  if (size > kMaxLerobotStatsBytes) {
    return common::InvalidArgument(path + ": larger than " + std::to_string(kMaxLerobotStatsBytes) +
                                   " bytes");
  }
  return common::Status::Ok();
}

common::Result<std::optional<LerobotRecordedStats>> ReadStatsJson(const std::string& dir) {
  const std::string rel = "meta/stats.json", path = dir + "/" + rel;
  EMBODY_RETURN_IF_ERROR(CheckStatsFileSize(path));
  std::ifstream in(path, std::ios::binary);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return common::InvalidArgument(path + ": not a JSON object");
  }
  LerobotRecordedStats out;
  out.file = rel;
  for (const auto& [feature, key] : kCompared) {
    (void)key;
    if (!j.contains(feature)) continue;
    EMBODY_ASSIGN_OR_RETURN(f, ParseFeature(j[feature], path + ": " + feature, false));
    if (f) out.features[feature] = std::move(*f);
  }
  return std::optional<LerobotRecordedStats>(std::move(out));
}

// Running aggregate of per-episode stats (Chan et al.'s merge, which is LeRobot's formula).
struct Aggregate {
  double n = 0;
  std::vector<double> min, max, mean, m2;
  bool merged_all = true;  // every episode carried the feature

  common::Status Merge(const LerobotFeatureStats& e, const std::string& what) {
    if (n == 0) {
      n = e.count;
      min = e.min;
      max = e.max;
      mean = e.mean;
      m2.resize(e.mean.size());
      for (size_t d = 0; d < m2.size(); ++d) m2[d] = e.std[d] * e.std[d] * e.count;
      return common::Status::Ok();
    }
    if (e.mean.size() != mean.size()) {
      return common::InvalidArgument(what + ": " + std::to_string(e.mean.size()) +
                                     " values, earlier episodes have " +
                                     std::to_string(mean.size()));
    }
    const double total = n + e.count;
    for (size_t d = 0; d < mean.size(); ++d) {
      const double delta = e.mean[d] - mean[d];
      mean[d] += delta * e.count / total;
      m2[d] += e.std[d] * e.std[d] * e.count + delta * delta * n * e.count / total;
      min[d] = std::min(min[d], e.min[d]);
      max[d] = std::max(max[d], e.max[d]);
    }
    n = total;
    return common::Status::Ok();
  }
};

common::Result<std::optional<LerobotRecordedStats>> ReadEpisodesStats(const std::string& dir) {
  const std::string rel = "meta/episodes_stats.jsonl", path = dir + "/" + rel;
  EMBODY_RETURN_IF_ERROR(CheckStatsFileSize(path));
  std::ifstream in(path, std::ios::binary);
  std::map<std::string, Aggregate> agg;
  int64_t episodes = 0;
  std::string line, block(1 << 20, '\0');
  int64_t line_no = 0;
  auto take_line = [&]() -> common::Status {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) return common::Status::Ok();
    const std::string what = path + " line " + std::to_string(line_no);
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("stats") || !j["stats"].is_object()) {
      return common::InvalidArgument(what + ": not a JSON object with \"stats\"");
    }
    ++episodes;
    for (const auto& [feature, key] : kCompared) {
      (void)key;
      Aggregate& a = agg[feature];
      const json& s = j["stats"];
      if (!s.contains(feature)) {
        a.merged_all = false;
        continue;
      }
      EMBODY_ASSIGN_OR_RETURN(f, ParseFeature(s[feature], what + ": " + feature, true));
      if (!f) {
        a.merged_all = false;
        continue;
      }
      EMBODY_RETURN_IF_ERROR(a.Merge(*f, what + ": " + feature));
    }
    return common::Status::Ok();
  };
  // Lines split by hand, each bounded before it grows further.
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const size_t got = static_cast<size_t>(in.gcount());
    for (size_t i = 0; i < got; ++i) {
      if (block[i] != '\n') {
        line.push_back(block[i]);
        if (line.size() > kMaxLerobotStatsLineBytes) {
          return common::InvalidArgument(path + " line " + std::to_string(line_no + 1) +
                                         ": longer than " +
                                         std::to_string(kMaxLerobotStatsLineBytes) + " bytes");
        }
        continue;
      }
      EMBODY_RETURN_IF_ERROR(take_line());
      line.clear();
    }
  }
  if (!line.empty()) EMBODY_RETURN_IF_ERROR(take_line());
  LerobotRecordedStats out;
  out.file = rel;
  for (auto& [feature, a] : agg) {
    // Stats of some episodes only would not describe the dataset.
    if (!a.merged_all || a.n <= 0 || episodes == 0) continue;
    LerobotFeatureStats f;
    f.count = a.n;
    f.min = a.min;
    f.max = a.max;
    f.mean = a.mean;
    for (double m2 : a.m2) f.std.push_back(std::sqrt(std::max(0.0, m2 / a.n)));
    out.features[feature] = std::move(f);
  }
  return std::optional<LerobotRecordedStats>(std::move(out));
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

common::Result<std::optional<LerobotRecordedStats>> ReadLerobotStats(const std::string& dir,
                                                                     const std::string& version) {
  std::error_code ec;
  const bool per_episode = fs::exists(dir + "/meta/episodes_stats.jsonl", ec);
  const bool whole = fs::exists(dir + "/meta/stats.json", ec);
  // v2.1 keeps its numbers per episode (a stats.json beside it is v2.0's, left over); v3.0
  // aggregates them into stats.json.
  if (per_episode && (version.rfind("v2", 0) == 0 || !whole)) return ReadEpisodesStats(dir);
  if (whole) return ReadStatsJson(dir);
  return std::optional<LerobotRecordedStats>();
}

json CompareLerobotStats(const LerobotRecordedStats& recorded, const DatasetStats& ours,
                         double tolerance) {
  json compared = json::array(), mismatches = json::array();
  int64_t mismatch_count = 0;
  double max_rel = 0;
  std::string worst;
  auto mismatch = [&](const std::string& text) {
    if (mismatches.size() < kMaxShownMismatches) mismatches.push_back(text);
    ++mismatch_count;
  };
  for (const auto& [feature, key] : kCompared) {
    auto rec = recorded.features.find(feature);
    auto own = std::find_if(ours.keys.begin(), ours.keys.end(),
                            [&](const KeyStats& k) { return k.spec.name == key; });
    if (rec == recorded.features.end() || own == ours.keys.end()) continue;
    compared.push_back(key);
    const LerobotFeatureStats& r = rec->second;
    if (own->mean.size() != r.mean.size()) {
      mismatch(std::string(key) + ": " + std::to_string(own->mean.size()) + " values here, " +
               std::to_string(r.mean.size()) + " in " + recorded.file);
      continue;
    }
    const std::pair<const char*, std::pair<const std::vector<double>*, const std::vector<double>*>>
        stats[] = {{"min", {&own->min, &r.min}},
                   {"max", {&own->max, &r.max}},
                   {"mean", {&own->mean, &r.mean}},
                   {"std", {&own->std, &r.std}}};
    for (size_t d = 0; d < r.mean.size(); ++d) {
      for (const auto& [stat, values] : stats) {
        const double here = (*values.first)[d], there = (*values.second)[d];
        const double scale = std::max({std::fabs(there), r.std[d], kScaleFloor});
        const double rel = std::isfinite(here) ? std::fabs(here - there) / scale
                                               : std::numeric_limits<double>::infinity();
        const std::string at = std::string(key) + "[" + std::to_string(d) + "] " + stat;
        if (worst.empty() || rel > max_rel) {
          max_rel = rel;
          worst = at;
        }
        if (rel > tolerance) {
          mismatch(at + ": " + Number(here) + " here, " + Number(there) + " in " + recorded.file +
                   " (relative difference " + Number(rel) + ")");
        }
      }
    }
  }
  json out = {{"file", recorded.file},
              {"compared", compared},
              {"tolerance", tolerance},
              {"max_rel_diff", std::isfinite(max_rel) ? json(max_rel) : json(nullptr)},
              {"ok", mismatch_count == 0}};
  if (!worst.empty()) out["worst"] = worst;
  if (mismatch_count > 0) {
    out["mismatches"] = mismatches;
    out["mismatch_count"] = mismatch_count;
  }
  return out;
}

}  // namespace storage
