// LeRobot's own statistics of a dataset, checked against the ones the import computed: a
// dataset whose recorded mean/std/min/max disagree with its frames was edited, truncated or
// converted wrongly somewhere, and a policy normalised with the recorded numbers would not see
// the data it was trained for. The check never fails an import; it is written into the
// manifest's source as "stats_check" and said as a warning by embody-data.
//
// Read, for `action` and `observation.state` (the features that become `actions` and
// `obs/state`), per dimension:
//   - v3.0 (and any version that has one): meta/stats.json, {"action": {"min": [...], "max",
//     "mean", "std", "count": [N], ...}, ...};
//   - v2.x: meta/episodes_stats.jsonl, one {"episode_index", "stats": {feature: {...}}} per
//     episode, aggregated as LeRobot aggregates them (means weighted by count; variance the
//     weighted mean of variance + (episode mean - total mean)^2; min of mins, max of maxes).
// A feature missing one of min, max, mean and std (or, per episode, count) is not compared.
//
// A difference counts relative to the larger of the recorded value's magnitude and the
// dimension's recorded std (so a mean near zero is not judged by its own tiny magnitude), and
// beyond kLerobotStatsTolerance it is a mismatch. LeRobot computes in float32, this import in
// float64 from the same float32 values: honest differences stay below 1e-5.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/stats.h"

namespace storage {

inline constexpr double kLerobotStatsTolerance = 1e-3;
inline constexpr uint64_t kMaxLerobotStatsBytes = uint64_t{4} << 30;  // either file
inline constexpr size_t kMaxLerobotStatsLineBytes = size_t{64} << 20;

struct LerobotFeatureStats {
  std::vector<double> min, max, mean, std;
  double count = 0;  // frames; 0 where the file does not say
};

struct LerobotRecordedStats {
  std::string file;  // relative to the dataset: "meta/stats.json" or "meta/episodes_stats.jsonl"
  std::map<std::string, LerobotFeatureStats> features;  // "action", "observation.state"
};

// The recorded statistics of the dataset at `dir` (codebase `version`); nullopt when it has
// no stats file; invalid_argument naming the file (and line) when one cannot be read.
common::Result<std::optional<LerobotRecordedStats>> ReadLerobotStats(const std::string& dir,
                                                                     const std::string& version);

// {"file", "compared": ["actions", ...], "tolerance", "max_rel_diff", "worst", "ok",
//  "mismatches": ["actions[3] mean: ... here, ... in meta/stats.json", ...] (the first 8, when
//  not ok), "mismatch_count"}.
nlohmann::json CompareLerobotStats(const LerobotRecordedStats& recorded, const DatasetStats& ours,
                                   double tolerance = kLerobotStatsTolerance);

}  // namespace storage
