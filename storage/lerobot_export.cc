// The export of a dataset directory as LeRobot v3.0 (lerobot_export.h): episodes are read in
// order; their low-dim rows gather in the current data file's columns and their camera frames go
// straight into each camera's current encoder; both roll over to a new file at their size limits.
// The metadata files are written last, from what was gathered on the way.
#include "storage/lerobot_export.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "storage/dataset_reader.h"
#include "storage/parquet/writer.h"
#include "storage/video_encode.h"

namespace storage {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kDataPath[] = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet";
constexpr char kVideoPath[] = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4";

std::string FileName(const std::string& dir, int64_t chunk, int64_t file, const char* ext) {
  char name[64];
  std::snprintf(name, sizeof(name), "/chunk-%03lld/file-%03lld.%s", static_cast<long long>(chunk),
                static_cast<long long>(file), ext);
  return dir + name;
}

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

std::string Dotted(std::string s) {
  std::replace(s.begin(), s.end(), '/', '.');
  return s;
}

bool Reserved(const std::string& feature) {
  return feature == "timestamp" || feature == "frame_index" || feature == "episode_index" ||
         feature == "index" || feature == "task_index";
}

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

// Element i of a row of `a` as a float, whatever the key's element type.
float ElementAsFloat(const Array& a, size_t i) {
  switch (a.spec.dtype) {
    case DType::kF32:
      return reinterpret_cast<const float*>(a.data.data())[i];
    case DType::kF64:
      return static_cast<float>(reinterpret_cast<const double*>(a.data.data())[i]);
    case DType::kI32:
      return static_cast<float>(reinterpret_cast<const int32_t*>(a.data.data())[i]);
    case DType::kU8:
      return static_cast<float>(a.data[i]);
  }
  return 0;
}

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

common::Status Exporter::Plan(LerobotExportResult* result) {
  const Schema& schema = ds_.schema();
  std::set<std::string> features;
  for (size_t k = 0; k < schema.size(); ++k) {
    const KeySpec& s = schema[k];
    const auto& shape = s.frame_shape;
    if (s.dtype == DType::kU8 && shape.size() == 3 && shape[2] == 3 && s.name.rfind("obs/", 0) == 0) {
      Camera c{k, "observation.images." + Dotted(s.name.substr(4)), static_cast<int>(shape[0]),
               static_cast<int>(shape[1])};
      if (c.height % 2 || c.width % 2) {
        return common::InvalidArgument(s.name + ": frames of " + std::to_string(c.height) + "x" +
                                       std::to_string(c.width) +
                                       " cannot be encoded as yuv420p video (height and width "
                                       "must be even)");
      }
      features.insert(c.feature);
      cams_.push_back(c);
      continue;
    }
    if (s.dtype == DType::kU8 || shape.size() > 1) {
      result->ignored_keys.push_back(s.name);
      continue;
    }
    std::string feature = s.name == "actions"     ? "action"
                          : s.name == "obs/state" ? "observation.state"
                          : s.name.rfind("obs/", 0) == 0 ? "observation." + Dotted(s.name.substr(4))
                                                         : Dotted(s.name);
    if (Reserved(feature) || !features.insert(feature).second) {
      result->ignored_keys.push_back(s.name);
      continue;
    }
    low_.push_back({k, feature, shape.empty() ? 1 : shape[0], shape.empty()});
  }
  if (std::none_of(low_.begin(), low_.end(), [](const LowDim& l) { return l.feature == "action"; })) {
    return common::InvalidArgument(
        "the dataset has no 'actions' key, which LeRobot's 'action' feature needs");
  }
  for (const LowDim& l : low_) low_stats_.emplace_back(l.dim);
  for (size_t c = 0; c < cams_.size(); ++c) cam_stats_.emplace_back(3);
  data_.low.resize(low_.size());
  encoders_.resize(cams_.size());
  video_at_.resize(cams_.size());
  episodes_.video_chunk.resize(cams_.size());
  episodes_.video_file.resize(cams_.size());
  episodes_.video_from.resize(cams_.size());
  episodes_.video_to.resize(cams_.size());
  return common::Status::Ok();
}

common::Status Exporter::AddEpisode(uint64_t e, const Episode& ep) {
  const std::string what = ds_.DescribeEpisode(e);
  const int64_t n = ep.frames();
  const std::string task = ep.Attribute(kAttrLanguage);
  auto [it, added] = task_index_.emplace(task, static_cast<int64_t>(tasks_.size()));
  if (added) tasks_.push_back(task);
  const int64_t first = frames_;

  // Low-dim rows.
  for (size_t i = 0; i < low_.size(); ++i) {
    const Array* a = ep.Find(ds_.schema()[low_[i].key].name);
    if (!a || a->frames != n) return common::Internal(what + ": key missing or short");
    std::vector<float>& col = data_.low[i];
    const size_t count = static_cast<size_t>(n * low_[i].dim);
    const size_t at = col.size();
    col.resize(at + count);
    for (size_t j = 0; j < count; ++j) {
      col[at + j] = ElementAsFloat(*a, j);
      if (!std::isfinite(col[at + j])) {
        return common::InvalidArgument(what + ": key " + a->spec.name + " has a non-finite value at frame " +
                                       std::to_string(j / low_[i].dim));
      }
      low_stats_[i].Add(col[at + j], j % static_cast<size_t>(low_[i].dim));
    }
    low_stats_[i].Count(n, n);
    data_.bytes += static_cast<int64_t>(count) * 4;
  }
  for (int64_t f = 0; f < n; ++f) {
    const double values[5] = {static_cast<float>(f / fps_), static_cast<double>(f),
                              static_cast<double>(e), static_cast<double>(first + f),
                              static_cast<double>(it->second)};
    data_.timestamp.push_back(static_cast<float>(values[0]));
    data_.frame_index.push_back(f);
    data_.episode_index.push_back(static_cast<int64_t>(e));
    data_.index.push_back(first + f);
    data_.task_index.push_back(it->second);
    for (int k = 0; k < 5; ++k) frame_stats_[k].Add(values[k], 0);
  }
  for (auto& s : frame_stats_) s.Count(n, n);
  data_.bytes += n * 36;
  episodes_.episode_index.push_back(static_cast<int64_t>(e));
  episodes_.length.push_back(n);
  episodes_.tasks.push_back({task});
  episodes_.data_chunk.push_back(data_at_.chunk);
  episodes_.data_file.push_back(data_at_.file);
  episodes_.from_index.push_back(first);
  episodes_.to_index.push_back(first + n);

  // Camera frames, into each camera's current file.
  for (size_t c = 0; c < cams_.size(); ++c) {
    const Camera& cam = cams_[c];
    const Array* a = ep.Find(ds_.schema()[cam.key].name);
    if (!a || a->frames != n) return common::Internal(what + ": camera key missing or short");
    auto& enc = encoders_[c];
    if (enc && enc->bytes() >= o_.video_files_size_in_mb << 20) {
      EMBODY_RETURN_IF_ERROR(enc->Finish());
      enc.reset();
      video_at_[c].Next(o_.chunks_size);
    }
    if (!enc) {
      const std::string path =
          FileName(out_ + "/videos/" + cam.feature, video_at_[c].chunk, video_at_[c].file, "mp4");
      std::error_code ec;
      fs::create_directories(fs::path(path).parent_path(), ec);
      if (ec) return common::Internal("mkdir " + path + ": " + ec.message());
      VideoEncodeOptions vo{.codec = o_.codec, .fps = fps_, .crf = o_.crf, .gop = o_.gop};
      EMBODY_ASSIGN_OR_RETURN(opened, VideoEncoder::Open(path, cam.height, cam.width, vo));
      enc = std::move(opened);
      video_encoder_ = enc->encoder();
      ++video_files_;
    }
    episodes_.video_chunk[c].push_back(video_at_[c].chunk);
    episodes_.video_file[c].push_back(video_at_[c].file);
    episodes_.video_from[c].push_back(static_cast<double>(enc->frames()) / fps_);
    common::Status st = enc->Add(a->data.data(), n);
    if (!st.ok()) return common::Internal(what + ": " + st.message());
    episodes_.video_to[c].push_back(static_cast<double>(enc->frames()) / fps_);
    const size_t pixels = static_cast<size_t>(cam.height) * cam.width;
    uint64_t sum[3] = {}, sumsq[3] = {};
    uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (size_t p = 0; p < pixels * static_cast<size_t>(n); ++p) {
      for (int ch = 0; ch < 3; ++ch) {
        const uint8_t v = a->data[p * 3 + ch];
        sum[ch] += v;
        sumsq[ch] += uint64_t{v} * v;
        lo[ch] = std::min(lo[ch], v);
        hi[ch] = std::max(hi[ch], v);
      }
    }
    for (int ch = 0; ch < 3; ++ch) cam_stats_[c].AddSums(ch, static_cast<double>(sum[ch]), static_cast<double>(sumsq[ch]), lo[ch], hi[ch]);
    cam_stats_[c].Count(n, static_cast<int64_t>(pixels) * n);
  }
  frames_ += n;
  if (data_.bytes >= o_.data_files_size_in_mb << 20) {
    EMBODY_RETURN_IF_ERROR(FlushData());
    data_at_.Next(o_.chunks_size);
  }
  return common::Status::Ok();
}

common::Status Exporter::FlushData() {
  if (data_.rows() == 0) return common::Status::Ok();
  parquet::TableWriter w;
  const int64_t rows = data_.rows();
  for (size_t i = 0; i < low_.size(); ++i) {
    if (low_[i].scalar) {
      w.AddFloat(low_[i].feature, data_.low[i]);
    } else {
      w.AddFloatList(low_[i].feature, data_.low[i], parquet::FixedOffsets(rows, low_[i].dim));
    }
  }
  w.AddFloat("timestamp", data_.timestamp);
  w.AddInt64("frame_index", data_.frame_index);
  w.AddInt64("episode_index", data_.episode_index);
  w.AddInt64("index", data_.index);
  w.AddInt64("task_index", data_.task_index);
  const std::string path = FileName(out_ + "/data", data_at_.chunk, data_at_.file, "parquet");
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return common::Internal("mkdir " + path + ": " + ec.message());
  EMBODY_RETURN_IF_ERROR(w.WriteFile(path));
  ++data_files_;
  data_ = DataFile{};
  data_.low.resize(low_.size());
  return common::Status::Ok();
}

common::Status Exporter::FinishVideos() {
  for (auto& enc : encoders_) {
    if (enc) EMBODY_RETURN_IF_ERROR(enc->Finish());
  }
  return common::Status::Ok();
}

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

common::Status Exporter::Run(LerobotExportResult* result) {
  ImportProgress progress;
  progress.demos_total = ds_.episodes();
  for (uint64_t e = 0; e < ds_.episodes(); ++e) {
    EMBODY_ASSIGN_OR_RETURN(ep, ds_.ReadEpisode(e));
    EMBODY_RETURN_IF_ERROR(AddEpisode(e, ep));
    progress.demos_done = e + 1;
    progress.frames += static_cast<uint64_t>(ep.frames());
    for (const Array& a : ep.arrays) progress.bytes += a.data.size();
    if (o_.progress) o_.progress(progress);
  }
  EMBODY_RETURN_IF_ERROR(FlushData());
  EMBODY_RETURN_IF_ERROR(FinishVideos());
  return WriteMeta(result);
}

// Removes the hidden directory unless the export got to its rename.
class TempDir {
 public:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  ~TempDir() {
    if (!kept_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void Keep() { kept_ = true; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool kept_ = false;
};

}  // namespace

common::Result<LerobotExportResult> ExportLerobot(const std::string& dataset_dir,
                                                  const std::string& out_dir,
                                                  const LerobotExportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.chunks_size < 1 || options.data_files_size_in_mb < 1 ||
      options.video_files_size_in_mb < 1) {
    return common::InvalidArgument("chunks_size and the file sizes must be positive");
  }
  if (options.fps < 0 || options.fps > 1000) {
    return common::InvalidArgument("fps must be in (0, 1000]", "fps");
  }
  std::error_code ec;
  const fs::path out = fs::absolute(fs::path(out_dir).lexically_normal(), ec);
  if (ec || out.filename().empty()) return common::InvalidArgument(out_dir + ": not a directory name");
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec) || !fs::is_empty(out, ec)) {
      return common::Status(common::Code::kAlreadyExists,
                            out_dir + ": exists and is not an empty directory");
    }
  }
  EMBODY_ASSIGN_OR_RETURN(ds, Dataset::Open(dataset_dir));
  double fps = options.fps;
  const json& source = ds->manifest().source;
  if (fps == 0 && source.contains("fps") && source["fps"].is_number()) {
    fps = source["fps"].get<double>();
  }
  if (!(fps > 0) || fps > 1000) {
    return common::InvalidArgument(dataset_dir +
                                       ": the dataset does not record its frame rate (its "
                                       "manifest's source has no fps); give one (--fps N)",
                                   "fps");
  }
  fs::create_directories(out.parent_path(), ec);
  if (ec) return common::Internal("mkdir " + out.parent_path().string() + ": " + ec.message());
  TempDir tmp(out.parent_path() / ("." + out.filename().string() + ".export-" +
                                   std::to_string(getpid())));
  fs::remove_all(tmp.path(), ec);
  fs::create_directory(tmp.path(), ec);
  if (ec) return common::Internal("mkdir " + tmp.path() + ": " + ec.message());

  LerobotExportResult result;
  result.fps = fps;
  Exporter exporter(*ds, tmp.path(), options, fps);
  EMBODY_RETURN_IF_ERROR(exporter.Plan(&result));
  EMBODY_RETURN_IF_ERROR(exporter.Run(&result));
  if (fs::exists(out, ec)) fs::remove(out, ec);  // an empty directory, checked above
  EMBODY_RETURN_IF_ERROR(common::Env::Default()->Rename(tmp.path(), out.string()));
  tmp.Keep();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace storage
