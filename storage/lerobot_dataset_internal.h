// What the LeRobot reader's parts share (lerobot_dataset.cc: meta/info.json and the layout;
// lerobot_episodes.cc: the episode metadata of v2.x and v3.0; lerobot_frames.cc: the data files'
// rows): the parts of info.json they use, bounded file reads and required parquet columns. Not
// part of the storage/ interface; use lerobot_dataset.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"
#include "storage/lerobot_dataset.h"
#include "storage/parquet/columns.h"

namespace storage::lerobot_internal {

// The parts of meta/info.json used here.
struct Info {
  std::string version;
  double fps = 0;
  int64_t chunks_size = 1000;
  int64_t total_episodes = -1;
  std::string data_path, video_path;
};

// A name LeRobot's files may give a feature, a camera or a directory: at most 128 bytes of
// letters, digits, '_', '-' and '.', not starting with '.'.
bool PlainName(const std::string& s);
// "episode_000042": the file and demonstration name of episode `index`.
std::string EpisodeName(int64_t index);
// `frames` rows of `dim` float32 values under `key`.
Array F32Array(const std::string& key, int dim, int64_t frames, const std::vector<float>& v);

// The file at `path` whole, refused when missing or larger than `max` bytes.
common::Result<std::string> ReadSmallFile(const std::string& path, uint64_t max);

template <typename T>
common::Result<std::vector<T>> RequiredFlat(const parquet::ParquetFile& f,
                                            const std::string& name) {
  EMBODY_ASSIGN_OR_RETURN(col, parquet::ReadFlatColumn<T>(f, name));
  for (size_t r = 0; r < col.valid.size(); ++r) {
    if (!col.valid[r]) {
      return common::InvalidArgument(f.name() + ": column '" + name + "' is null in row " +
                                     std::to_string(r));
    }
  }
  return std::move(col.values);
}

// v2.x: meta/episodes.jsonl, one file per episode.
common::Status ReadEpisodesV2(const Info& info, const VideoEpisodesImportOptions& options,
                              LerobotLayout& layout);
// v3.0: meta/episodes/**/*.parquet, many episodes per data and video file.
common::Status ReadEpisodesV3(const Info& info, const VideoEpisodesImportOptions& options,
                              LerobotLayout& layout);

}  // namespace storage::lerobot_internal
