// The LeRobot exporter's state, shared by the files that implement it (lerobot_export.cc: the
// plan and the episodes streamed into data and video files; lerobot_export_meta.cc: the meta/
// files written last). Not part of the storage/ interface; use lerobot_export.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/dataset_reader.h"
#include "storage/lerobot_export.h"
#include "storage/video_encode.h"

namespace storage::lerobot_export_internal {

using nlohmann::json;

// Where a file sequence stands: LeRobot moves to the next chunk after chunks_size files.
struct FileIndex {
  int64_t chunk = 0;
  int64_t file = 0;
  void Next(int64_t chunks_size) {
    if (++file >= chunks_size) {
      ++chunk;
      file = 0;
    }
  }
};

// A low-dim key written as a float32 feature.
struct LowDim {
  size_t key = 0;  // index in the dataset's schema
  std::string feature;
  int64_t dim = 0;  // elements per frame
  bool scalar = false;
};

struct Camera {
  size_t key = 0;
  std::string feature;
  int height = 0, width = 0;
};

// Per-dimension min, max, mean and std, as meta/stats.json states them.
class FeatureStats {
 public:
  explicit FeatureStats(int64_t dim)
      : sum_(dim), sumsq_(dim), min_(dim, std::numeric_limits<double>::infinity()),
        max_(dim, -std::numeric_limits<double>::infinity()) {}

  // One value of dimension d. Count() then says how many frames (what "count" states) and how
  // many values per dimension (the mean's denominator: pixels for an image channel) came in.
  void Add(double v, size_t d) {
    sum_[d] += v;
    sumsq_[d] += v * v;
    min_[d] = std::min(min_[d], v);
    max_[d] = std::max(max_[d], v);
  }
  // Sums already taken over many values (an image channel's pixels).
  void AddSums(size_t d, double sum, double sumsq, double lo, double hi) {
    sum_[d] += sum;
    sumsq_[d] += sumsq;
    min_[d] = std::min(min_[d], lo);
    max_[d] = std::max(max_[d], hi);
  }
  void Count(int64_t frames, int64_t values_per_dim) {
    count_ += frames;
    values_ += values_per_dim;
  }

  // `scale` divides every value (1/255 for images); `image` nests each as [[v]] (shape (3,1,1)).
  json ToJson(double scale, bool image) const {
    json out = {{"min", json::array()}, {"max", json::array()}, {"mean", json::array()},
                {"std", json::array()}, {"count", json::array({count_})}};
    const double n = static_cast<double>(std::max<int64_t>(values_, 1));
    for (size_t d = 0; d < sum_.size(); ++d) {
      const double mean = sum_[d] / n;
      const double var = std::max(0.0, sumsq_[d] / n - mean * mean);
      const double v[4] = {values_ ? min_[d] : 0, values_ ? max_[d] : 0, mean, std::sqrt(var)};
      const char* names[4] = {"min", "max", "mean", "std"};
      for (int k = 0; k < 4; ++k) {
        json x = v[k] * scale;
        out[names[k]].push_back(image ? json::array({json::array({x})}) : x);
      }
    }
    return out;
  }

 private:
  std::vector<double> sum_, sumsq_, min_, max_;
  int64_t count_ = 0, values_ = 0;
};

// The columns of the data file being filled.
struct DataFile {
  std::vector<std::vector<float>> low;  // per LowDim: rows x dim
  std::vector<float> timestamp;
  std::vector<int64_t> frame_index, episode_index, index, task_index;
  int64_t bytes = 0;
  int64_t rows() const { return static_cast<int64_t>(frame_index.size()); }
};

// The episode table (meta/episodes), one entry per episode.
struct EpisodeTable {
  std::vector<int64_t> episode_index, length, data_chunk, data_file, from_index, to_index;
  std::vector<std::vector<std::string>> tasks;
  std::vector<std::vector<int64_t>> video_chunk, video_file;  // per camera
  std::vector<std::vector<double>> video_from, video_to;
};

class Exporter {
 public:
  Exporter(const Dataset& ds, std::string out, const LerobotExportOptions& o, double fps)
      : ds_(ds), out_(std::move(out)), o_(o), fps_(fps) {}

  common::Status Plan(LerobotExportResult* result);
  common::Status Run(LerobotExportResult* result);

 private:
  common::Status AddEpisode(uint64_t e, const Episode& ep);
  common::Status FlushData();
  common::Status FinishVideos();
  common::Status WriteMeta(LerobotExportResult* result);
  json Features() const;

  const Dataset& ds_;
  const std::string out_;
  const LerobotExportOptions& o_;
  const double fps_;
  std::vector<LowDim> low_;
  std::vector<Camera> cams_;
  std::vector<FeatureStats> low_stats_, cam_stats_;
  FeatureStats frame_stats_[5] = {FeatureStats(1), FeatureStats(1), FeatureStats(1),
                                  FeatureStats(1), FeatureStats(1)};
  DataFile data_;
  FileIndex data_at_;
  int64_t data_files_ = 0;
  std::vector<std::unique_ptr<VideoEncoder>> encoders_;
  std::vector<FileIndex> video_at_;
  int64_t video_files_ = 0;
  std::string video_encoder_;
  EpisodeTable episodes_;
  std::vector<std::string> tasks_;
  std::map<std::string, int64_t> task_index_;
  int64_t frames_ = 0;
};

}  // namespace storage::lerobot_export_internal
