// The export's meta/ files, written once every episode is in: info.json (features and file path
// templates), stats.json, tasks.parquet and the episode table (meta/episodes/*.parquet).
#include <filesystem>
#include <string>

#include "common/file_util.h"
#include "storage/lerobot_export_internal.h"
#include "storage/parquet/writer.h"

namespace storage::lerobot_export_internal {

namespace {

namespace fs = std::filesystem;

constexpr char kDataPath[] = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet";
constexpr char kVideoPath[] = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4";

common::Status WriteText(const std::string& path, const std::string& text) {
  return common::WriteFileAtomic(path, text);
}

// pandas' own record of a DataFrame whose index is the "task" column: how LeRobot's
// pd.read_parquet(meta/tasks.parquet) gets tasks indexed by their text.
std::string TasksPandasMetadata() {
  json cols = json::array();
  cols.push_back({{"name", "task_index"}, {"field_name", "task_index"}, {"pandas_type", "int64"},
                  {"numpy_type", "int64"}, {"metadata", nullptr}});
  cols.push_back({{"name", "task"}, {"field_name", "task"}, {"pandas_type", "unicode"},
                  {"numpy_type", "object"}, {"metadata", nullptr}});
  json m = {{"index_columns", {"task"}},
            {"column_indexes", {{{"name", nullptr}, {"field_name", nullptr},
                                 {"pandas_type", "unicode"}, {"numpy_type", "object"},
                                 {"metadata", {{"encoding", "UTF-8"}}}}}},
            {"columns", cols},
            {"creator", {{"library", "embody"}, {"version", "1"}}},
            {"pandas_version", "2.0.0"}};
  return m.dump();
}

}  // namespace

json Exporter::Features() const {
  json f = json::object();
  for (const LowDim& l : low_) {
    json names = json::array();
    for (int64_t d = 0; d < l.dim; ++d) names.push_back(l.feature + "_" + std::to_string(d));
    f[l.feature] = {{"dtype", "float32"}, {"shape", {l.dim}}, {"names", l.scalar ? json() : names}};
  }
  for (const Camera& c : cams_) {
    f[c.feature] = {{"dtype", "video"},
                    {"shape", {c.height, c.width, 3}},
                    {"names", {"height", "width", "channels"}},
                    {"info",
                     {{"video.height", c.height},
                      {"video.width", c.width},
                      {"video.codec", o_.codec == "av1" ? "av1" : o_.codec},
                      {"video.pix_fmt", "yuv420p"},
                      {"video.is_depth_map", false},
                      {"video.fps", fps_},
                      {"video.channels", 3},
                      {"has_audio", false}}}};
  }
  f["timestamp"] = {{"dtype", "float32"}, {"shape", {1}}, {"names", nullptr}};
  for (const char* k : {"frame_index", "episode_index", "index", "task_index"}) {
    f[k] = {{"dtype", "int64"}, {"shape", {1}}, {"names", nullptr}};
  }
  return f;
}

common::Status Exporter::WriteMeta(LerobotExportResult* result) {
  std::error_code ec;
  fs::create_directories(out_ + "/meta/episodes/chunk-000", ec);
  if (ec) return common::Internal("mkdir " + out_ + "/meta: " + ec.message());
  {
    parquet::TableWriter w;
    std::vector<int64_t> index(tasks_.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int64_t>(i);
    w.AddInt64("task_index", index);
    w.AddString("task", tasks_);
    w.AddKeyValue("pandas", TasksPandasMetadata());
    EMBODY_RETURN_IF_ERROR(w.WriteFile(out_ + "/meta/tasks.parquet"));
  }
  {
    const EpisodeTable& t = episodes_;
    parquet::TableWriter w;
    w.AddInt64("episode_index", t.episode_index);
    w.AddStringList("tasks", t.tasks);
    w.AddInt64("length", t.length);
    w.AddInt64("data/chunk_index", t.data_chunk);
    w.AddInt64("data/file_index", t.data_file);
    w.AddInt64("dataset_from_index", t.from_index);
    w.AddInt64("dataset_to_index", t.to_index);
    for (size_t c = 0; c < cams_.size(); ++c) {
      const std::string p = "videos/" + cams_[c].feature + "/";
      w.AddInt64(p + "chunk_index", t.video_chunk[c]);
      w.AddInt64(p + "file_index", t.video_file[c]);
      w.AddDouble(p + "from_timestamp", t.video_from[c]);
      w.AddDouble(p + "to_timestamp", t.video_to[c]);
    }
    const std::vector<int64_t> zeros(t.episode_index.size(), 0);
    w.AddInt64("meta/episodes/chunk_index", zeros);
    w.AddInt64("meta/episodes/file_index", zeros);
    EMBODY_RETURN_IF_ERROR(w.WriteFile(out_ + "/meta/episodes/chunk-000/file-000.parquet"));
  }
  json stats = json::object();
  for (size_t i = 0; i < low_.size(); ++i) stats[low_[i].feature] = low_stats_[i].ToJson(1, false);
  for (size_t c = 0; c < cams_.size(); ++c) {
    stats[cams_[c].feature] = cam_stats_[c].ToJson(1.0 / 255, true);
  }
  const char* frame_keys[5] = {"timestamp", "frame_index", "episode_index", "index", "task_index"};
  for (int k = 0; k < 5; ++k) stats[frame_keys[k]] = frame_stats_[k].ToJson(1, false);
  EMBODY_RETURN_IF_ERROR(WriteText(out_ + "/meta/stats.json", stats.dump(4) + "\n"));

  const json& source = ds_.manifest().source;
  std::string robot = o_.robot_type;
  if (robot.empty() && source.contains("robot_type") && source["robot_type"].is_string()) {
    robot = source["robot_type"].get<std::string>();
  }
  const int64_t episodes = static_cast<int64_t>(episodes_.episode_index.size());
  json info = {{"codebase_version", "v3.0"},
               {"robot_type", robot.empty() ? "unknown" : robot},
               {"total_episodes", episodes},
               {"total_frames", frames_},
               {"total_tasks", static_cast<int64_t>(tasks_.size())},
               {"chunks_size", o_.chunks_size},
               {"data_files_size_in_mb", o_.data_files_size_in_mb},
               {"video_files_size_in_mb", o_.video_files_size_in_mb},
               {"splits", {{"train", "0:" + std::to_string(episodes)}}},
               {"data_path", kDataPath},
               {"video_path", cams_.empty() ? json() : json(kVideoPath)},
               {"features", Features()}};
  if (fps_ == std::floor(fps_)) {
    info["fps"] = static_cast<int64_t>(fps_);
  } else {
    info["fps"] = fps_;
  }
  EMBODY_RETURN_IF_ERROR(WriteText(out_ + "/meta/info.json", info.dump(4) + "\n"));
  for (const auto& [name, f] : Features().items()) result->features.push_back(name);
  result->episodes = episodes;
  result->frames = frames_;
  result->tasks = static_cast<int64_t>(tasks_.size());
  result->data_files = data_files_;
  result->video_files = video_files_;
  result->video_encoder = video_encoder_;
  return common::Status::Ok();
}

}  // namespace storage::lerobot_export_internal
