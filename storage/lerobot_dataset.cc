// LeRobot layouts: meta/info.json and the episode metadata resolved to files, and the checked
// low-dim rows of an episode. The import itself (videos, writer) is lerobot_import.cc.
#include "storage/lerobot_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/parse_int.h"
#include "storage/parquet/columns.h"

namespace storage {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxInfoBytes = 16 << 20;
constexpr uint64_t kMaxEpisodesJsonlBytes = uint64_t{1} << 30;
constexpr size_t kMaxTaskBytes = 64 << 10;
constexpr size_t kMaxFeatures = 4096;
constexpr int64_t kMaxIndex = 1000000000;

common::Result<std::string> ReadSmallFile(const std::string& path, uint64_t max) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return common::InvalidArgument(path + ": missing");
  uint64_t size = fs::file_size(path, ec);
  if (ec) return common::InvalidArgument(path + ": " + ec.message());
  if (size > max) {
    return common::InvalidArgument(path + ": larger than " + std::to_string(max) + " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  std::string s(size, '\0');
  if (!in.read(s.data(), static_cast<std::streamsize>(size))) {
    return common::InvalidArgument(path + ": cannot read");
  }
  return s;
}

bool PlainName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// Python's str.format for the fields LeRobot's templates use: "{name}" and "{name:0Nd}" /
// "{name:d}". The result must stay inside the dataset (relative, no "..").
common::Result<std::string> FormatPath(const std::string& tmpl, const std::string& what,
                                       const std::map<std::string, int64_t>& ints,
                                       const std::map<std::string, std::string>& strings) {
  auto bad = [&](const std::string& msg) { return common::InvalidArgument(what + ": " + msg); };
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl[i] != '{') {
      if (tmpl[i] == '}') return bad("unbalanced '}' in '" + tmpl + "'");
      out.push_back(tmpl[i++]);
      continue;
    }
    size_t close = tmpl.find('}', i);
    if (close == std::string::npos) return bad("unbalanced '{' in '" + tmpl + "'");
    std::string field = tmpl.substr(i + 1, close - i - 1);
    std::string spec;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (auto it = strings.find(field); it != strings.end() && spec.empty()) {
      out += it->second;
    } else if (auto it = ints.find(field); it != ints.end()) {
      int width = 0;
      if (!spec.empty()) {
        // "d" or a width of up to three digits: "06d".
        const auto digits = std::string_view(spec).substr(0, spec.size() - 1);
        const auto w = digits.empty() ? common::Result<int>(0) : common::ParseInt(digits, 0, 999);
        if (spec.back() != 'd' || digits.size() > 3 || digits.starts_with('-') || !w.ok()) {
          return bad("unsupported format '{" + field + ":" + spec + "}' in '" + tmpl + "'");
        }
        width = *w;
      }
      char buf[48];
      std::snprintf(buf, sizeof(buf), "%0*lld", width, static_cast<long long>(it->second));
      out += buf;
    } else {
      return bad("unknown field '{" + field + "}' in '" + tmpl + "'");
    }
    i = close + 1;
  }
  fs::path p(out);
  if (out.empty() || p.is_absolute()) return bad("'" + out + "' is not a relative path");
  for (const auto& part : p) {
    if (part == "..") return bad("'" + out + "' leaves the dataset directory");
  }
  return out;
}

int64_t ChunkOf(int64_t index, int64_t chunks_size) { return index / chunks_size; }

// The parts of meta/info.json used here.
struct Info {
  std::string version;
  double fps = 0;
  int64_t chunks_size = 1000;
  int64_t total_episodes = -1;
  std::string data_path, video_path;
};

common::Status ReadFeatures(const json& features, const std::string& what,
                            const VideoEpisodesImportOptions& options, LerobotLayout& layout) {
  if (!features.is_object() || features.size() > kMaxFeatures) {
    return common::InvalidArgument(what + ": features must be an object of at most " +
                                   std::to_string(kMaxFeatures) + " features");
  }
  std::set<std::string> keys = {"obs/state"};
  for (const auto& [name, f] : features.items()) {
    if (!f.is_object() || !f.contains("dtype") || !f["dtype"].is_string()) {
      return common::InvalidArgument(what + ": feature '" + name + "' has no dtype");
    }
    const std::string dtype = f["dtype"].get<std::string>();
    if (name == "action" || name == "observation.state") {
      const json& shape = f.value("shape", json());
      if (dtype != "float32" || !shape.is_array() || shape.size() != 1 ||
          !shape[0].is_number_integer() || shape[0].get<int64_t>() < 1 ||
          shape[0].get<int64_t>() > options.max_low_dim) {
        return common::InvalidArgument(
            what + ": feature '" + name + "' must be float32 of shape [n], 1 <= n <= " +
            std::to_string(options.max_low_dim) + ", found " + dtype + " " + shape.dump());
      }
      int dim = static_cast<int>(shape[0].get<int64_t>());
      (name == "action" ? layout.action_dim : layout.state_dim) = dim;
    } else if (dtype == "video") {
      std::string short_name = name;
      for (const std::string prefix : {"observation.images.", "observation."}) {
        if (short_name.rfind(prefix, 0) == 0 && short_name.size() > prefix.size()) {
          short_name = short_name.substr(prefix.size());
          break;
        }
      }
      if (!PlainName(name) || !PlainName(short_name)) {
        return common::InvalidArgument(what + ": camera feature name '" + name +
                                       "' is not a plain name ([A-Za-z0-9._-], up to 128)");
      }
      std::string key = "obs/" + short_name;
      if (!keys.insert(key).second) {
        return common::InvalidArgument(what + ": camera '" + name + "' becomes key " + key +
                                       ", which another feature has");
      }
      layout.cameras.push_back({name, key});
    } else if (dtype == "image") {
      return common::Status(common::Code::kUnimplemented,
                            what + ": feature '" + name +
                                "' stores images inside the parquet (dtype image); only video "
                                "cameras are imported");
    } else if (name != "timestamp" && name != "frame_index" && name != "episode_index" &&
               name != "index" && name != "task_index") {
      layout.ignored_features.push_back(name);
    }
  }
  if (layout.action_dim == 0) return common::InvalidArgument(what + ": no 'action' feature");
  std::sort(layout.cameras.begin(), layout.cameras.end(),
            [](const LerobotCamera& a, const LerobotCamera& b) { return a.key < b.key; });
  return common::Status::Ok();
}

common::Result<Info> ReadInfo(const std::string& dir, const VideoEpisodesImportOptions& options,
                              LerobotLayout& layout) {
  const std::string path = dir + "/meta/info.json";
  EMBODY_ASSIGN_OR_RETURN(text, ReadSmallFile(path, kMaxInfoBytes));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return common::InvalidArgument(path + ": not a JSON object");
  }
  Info info;
  if (!j.contains("codebase_version") || !j["codebase_version"].is_string()) {
    return common::InvalidArgument(path + ": no codebase_version");
  }
  info.version = j["codebase_version"].get<std::string>();
  if (info.version != "v2.0" && info.version != "v2.1" && info.version != "v3.0") {
    return common::Status(common::Code::kUnimplemented,
                          path + ": codebase_version '" + info.version +
                              "' is not supported (v2.0, v2.1 and v3.0 are)");
  }
  if (!j.contains("fps") || !j["fps"].is_number() || !(j["fps"].get<double>() > 0) ||
      j["fps"].get<double>() > 1000) {
    return common::InvalidArgument(path + ": fps must be a number in (0, 1000]");
  }
  info.fps = j["fps"].get<double>();
  if (j.contains("chunks_size")) {
    if (!j["chunks_size"].is_number_integer() || j["chunks_size"].get<int64_t>() < 1) {
      return common::InvalidArgument(path + ": chunks_size must be a positive integer");
    }
    info.chunks_size = j["chunks_size"].get<int64_t>();
  }
  if (j.contains("total_episodes")) {
    if (!j["total_episodes"].is_number_integer()) {
      return common::InvalidArgument(path + ": total_episodes must be an integer");
    }
    info.total_episodes = j["total_episodes"].get<int64_t>();
  }
  for (auto [field, out] :
       {std::pair{"data_path", &info.data_path}, std::pair{"video_path", &info.video_path}}) {
    if (j.contains(field) && j[field].is_string()) *out = j[field].get<std::string>();
  }
  if (info.data_path.empty()) return common::InvalidArgument(path + ": no data_path template");
  if (!j.contains("features")) return common::InvalidArgument(path + ": no features");
  EMBODY_RETURN_IF_ERROR(ReadFeatures(j["features"], path, options, layout));
  if (!layout.cameras.empty() && info.video_path.empty()) {
    return common::InvalidArgument(path + ": video features but no video_path template");
  }
  return info;
}

common::Result<std::string> JoinTasks(const std::vector<std::string>& tasks,
                                      const std::string& what) {
  std::string out;
  for (const std::string& t : tasks) {
    if (!out.empty()) out += "; ";
    out += t;
  }
  if (out.size() > kMaxTaskBytes) {
    return common::InvalidArgument(what + ": tasks are longer than " +
                                   std::to_string(kMaxTaskBytes) + " bytes");
  }
  return out;
}

// v2.x: meta/episodes.jsonl, one file per episode.
common::Status ReadEpisodesV2(const Info& info, const VideoEpisodesImportOptions& options,
                              LerobotLayout& layout) {
  const std::string path = layout.dir + "/meta/episodes.jsonl";
  EMBODY_ASSIGN_OR_RETURN(text, ReadSmallFile(path, kMaxEpisodesJsonlBytes));
  std::istringstream in(text);
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string what = path + " line " + std::to_string(line_no);
    if (static_cast<int64_t>(layout.episodes.size()) >= options.max_episodes) {
      return common::InvalidArgument(path + ": more than " + std::to_string(options.max_episodes) +
                                     " episodes");
    }
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return common::InvalidArgument(what + ": not a JSON object");
    }
    LerobotEpisodeRef ep;
    for (auto [field, out] :
         {std::pair{"episode_index", &ep.index}, std::pair{"length", &ep.length}}) {
      if (!j.contains(field) || !j[field].is_number_integer()) {
        return common::InvalidArgument(what + ": " + field + " must be an integer");
      }
      *out = j[field].get<int64_t>();
    }
    if (ep.index < 0 || ep.index > kMaxIndex) {
      return common::InvalidArgument(what + ": episode_index " + std::to_string(ep.index) +
                                     " is out of range");
    }
    std::vector<std::string> tasks;
    if (j.contains("tasks")) {
      if (!j["tasks"].is_array()) return common::InvalidArgument(what + ": tasks must be a list");
      for (const auto& t : j["tasks"]) {
        if (!t.is_string()) return common::InvalidArgument(what + ": tasks must be strings");
        tasks.push_back(t.get<std::string>());
      }
    }
    EMBODY_ASSIGN_OR_RETURN(task, JoinTasks(tasks, what));
    ep.task = std::move(task);
    const int64_t chunk = ChunkOf(ep.index, info.chunks_size);
    EMBODY_ASSIGN_OR_RETURN(
        data, FormatPath(info.data_path, layout.dir + "/meta/info.json data_path",
                         {{"episode_chunk", chunk}, {"episode_index", ep.index}}, {}));
    ep.data_path = layout.dir + "/" + data;
    for (const LerobotCamera& cam : layout.cameras) {
      EMBODY_ASSIGN_OR_RETURN(video,
                              FormatPath(info.video_path, layout.dir + "/meta/info.json video_path",
                                         {{"episode_chunk", chunk}, {"episode_index", ep.index}},
                                         {{"video_key", cam.feature}}));
      ep.videos.push_back({layout.dir + "/" + video, 0, -1});
    }
    layout.episodes.push_back(std::move(ep));
  }
  return common::Status::Ok();
}

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

// v3.0: meta/episodes/**/*.parquet, many episodes per data and video file.
common::Status ReadEpisodesV3(const Info& info, const VideoEpisodesImportOptions& options,
                              LerobotLayout& layout) {
  const std::string meta = layout.dir + "/meta/episodes";
  std::error_code ec;
  if (!fs::is_directory(meta, ec)) return common::InvalidArgument(meta + ": missing");
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(meta, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".parquet")
      files.push_back(it->path().string());
    if (files.size() > 100000) return common::InvalidArgument(meta + ": too many files");
  }
  if (ec) return common::InvalidArgument(meta + ": " + ec.message());
  if (files.empty()) return common::InvalidArgument(meta + ": no .parquet files");
  std::sort(files.begin(), files.end());
  for (const std::string& path : files) {
    EMBODY_ASSIGN_OR_RETURN(f, parquet::ParquetFile::Open(path));
    if (static_cast<int64_t>(layout.episodes.size()) + f->num_rows() > options.max_episodes) {
      return common::InvalidArgument(path + ": more than " + std::to_string(options.max_episodes) +
                                     " episodes");
    }
    EMBODY_ASSIGN_OR_RETURN(index, RequiredFlat<int64_t>(*f, "episode_index"));
    EMBODY_ASSIGN_OR_RETURN(length, RequiredFlat<int64_t>(*f, "length"));
    EMBODY_ASSIGN_OR_RETURN(data_chunk, RequiredFlat<int64_t>(*f, "data/chunk_index"));
    EMBODY_ASSIGN_OR_RETURN(data_file, RequiredFlat<int64_t>(*f, "data/file_index"));
    EMBODY_ASSIGN_OR_RETURN(from_index, RequiredFlat<int64_t>(*f, "dataset_from_index"));
    EMBODY_ASSIGN_OR_RETURN(to_index, RequiredFlat<int64_t>(*f, "dataset_to_index"));
    EMBODY_ASSIGN_OR_RETURN(tasks, parquet::ReadListColumn<std::string>(*f, "tasks"));
    struct CameraColumns {
      std::vector<int64_t> chunk, file;
      std::vector<double> from, to;
    };
    std::vector<CameraColumns> cams;
    for (const LerobotCamera& cam : layout.cameras) {
      const std::string p = "videos/" + cam.feature + "/";
      CameraColumns c;
      EMBODY_ASSIGN_OR_RETURN(chunk, RequiredFlat<int64_t>(*f, p + "chunk_index"));
      EMBODY_ASSIGN_OR_RETURN(file, RequiredFlat<int64_t>(*f, p + "file_index"));
      EMBODY_ASSIGN_OR_RETURN(from, RequiredFlat<double>(*f, p + "from_timestamp"));
      EMBODY_ASSIGN_OR_RETURN(to, RequiredFlat<double>(*f, p + "to_timestamp"));
      c.chunk = std::move(chunk);
      c.file = std::move(file);
      c.from = std::move(from);
      c.to = std::move(to);
      cams.push_back(std::move(c));
    }
    for (int64_t r = 0; r < f->num_rows(); ++r) {
      const size_t i = static_cast<size_t>(r);
      LerobotEpisodeRef ep;
      ep.index = index[i];
      ep.length = length[i];
      const std::string what =
          path + " row " + std::to_string(r) + " (episode " + std::to_string(ep.index) + ")";
      if (ep.index < 0 || ep.index > kMaxIndex || data_chunk[i] < 0 || data_file[i] < 0 ||
          data_chunk[i] > kMaxIndex || data_file[i] > kMaxIndex) {
        return common::InvalidArgument(what + ": an index is out of range");
      }
      if (from_index[i] < 0 || to_index[i] - from_index[i] != ep.length) {
        return common::InvalidArgument(what + ": dataset_from_index " +
                                       std::to_string(from_index[i]) + " to dataset_to_index " +
                                       std::to_string(to_index[i]) + " is not its length " +
                                       std::to_string(ep.length));
      }
      ep.from_index = from_index[i];
      if (tasks.rows() != f->num_rows() || (!tasks.valid.empty() && !tasks.valid[i])) {
        return common::InvalidArgument(what + ": no tasks");
      }
      std::vector<std::string> t(tasks.values.begin() + tasks.offsets[i],
                                 tasks.values.begin() + tasks.offsets[i + 1]);
      EMBODY_ASSIGN_OR_RETURN(task, JoinTasks(t, what));
      ep.task = std::move(task);
      EMBODY_ASSIGN_OR_RETURN(
          data, FormatPath(info.data_path, layout.dir + "/meta/info.json data_path",
                           {{"chunk_index", data_chunk[i]}, {"file_index", data_file[i]}}, {}));
      ep.data_path = layout.dir + "/" + data;
      for (size_t c = 0; c < cams.size(); ++c) {
        const CameraColumns& cc = cams[c];
        if (cc.chunk[i] < 0 || cc.file[i] < 0 || cc.chunk[i] > kMaxIndex ||
            cc.file[i] > kMaxIndex || !(cc.from[i] >= 0) || !(cc.to[i] > cc.from[i]) ||
            !(cc.to[i] < 1e9)) {
          return common::InvalidArgument(what + ": videos/" + layout.cameras[c].feature +
                                         " has a bad file index or time range");
        }
        EMBODY_ASSIGN_OR_RETURN(
            video, FormatPath(info.video_path, layout.dir + "/meta/info.json video_path",
                              {{"chunk_index", cc.chunk[i]}, {"file_index", cc.file[i]}},
                              {{"video_key", layout.cameras[c].feature}}));
        ep.videos.push_back({layout.dir + "/" + video, cc.from[i], cc.to[i]});
      }
      layout.episodes.push_back(std::move(ep));
    }
  }
  return common::Status::Ok();
}

// A data file's columns, read whole.
struct FrameTable {
  std::string path;
  int64_t rows = 0;
  parquet::ListColumn<float> action, state;
  std::vector<double> timestamp;
  std::vector<int64_t> frame_index, episode_index, index;
};

common::Result<parquet::ListColumn<float>> ReadVectors(const parquet::ParquetFile& f,
                                                       const std::string& name, int dim) {
  EMBODY_ASSIGN_OR_RETURN(col, parquet::ReadListColumn<float>(f, name));
  auto bad = [&](const std::string& msg) {
    return common::InvalidArgument(f.name() + ": column '" + name + "': " + msg);
  };
  for (int64_t r = 0; r < col.rows(); ++r) {
    const size_t i = static_cast<size_t>(r);
    if (!col.valid.empty() && !col.valid[i]) return bad("null in row " + std::to_string(r));
    if (col.offsets[i + 1] - col.offsets[i] != dim) {
      return bad("row " + std::to_string(r) + " has " +
                 std::to_string(col.offsets[i + 1] - col.offsets[i]) +
                 " values, info.json's shape is [" + std::to_string(dim) + "]");
    }
  }
  for (size_t k = 0; k < col.values.size(); ++k) {
    if ((!col.value_valid.empty() && !col.value_valid[k]) || !std::isfinite(col.values[k])) {
      return bad("row " + std::to_string(static_cast<int64_t>(k) / dim) + " element " +
                 std::to_string(static_cast<int64_t>(k) % dim) + " is null or not finite");
    }
  }
  return col;
}

common::Result<std::shared_ptr<const FrameTable>> ReadFrameTable(const LerobotLayout& layout,
                                                                 const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return common::InvalidArgument(path + ": missing");
  EMBODY_ASSIGN_OR_RETURN(f, parquet::ParquetFile::Open(path));
  auto t = std::make_shared<FrameTable>();
  t->path = path;
  t->rows = f->num_rows();
  EMBODY_ASSIGN_OR_RETURN(action, ReadVectors(*f, "action", layout.action_dim));
  t->action = std::move(action);
  if (layout.state_dim > 0) {
    EMBODY_ASSIGN_OR_RETURN(state, ReadVectors(*f, "observation.state", layout.state_dim));
    t->state = std::move(state);
  }
  EMBODY_ASSIGN_OR_RETURN(ts, RequiredFlat<double>(*f, "timestamp"));
  EMBODY_ASSIGN_OR_RETURN(fi, RequiredFlat<int64_t>(*f, "frame_index"));
  EMBODY_ASSIGN_OR_RETURN(ei, RequiredFlat<int64_t>(*f, "episode_index"));
  EMBODY_ASSIGN_OR_RETURN(ix, RequiredFlat<int64_t>(*f, "index"));
  t->timestamp = std::move(ts);
  t->frame_index = std::move(fi);
  t->episode_index = std::move(ei);
  t->index = std::move(ix);
  for (int64_t n :
       {t->action.rows(), layout.state_dim > 0 ? t->state.rows() : t->rows,
        static_cast<int64_t>(t->timestamp.size()), static_cast<int64_t>(t->frame_index.size()),
        static_cast<int64_t>(t->episode_index.size()), static_cast<int64_t>(t->index.size())}) {
    if (n != t->rows) {
      return common::InvalidArgument(path + ": columns have different row counts");
    }
  }
  return std::shared_ptr<const FrameTable>(std::move(t));
}

}  // namespace

common::Result<LerobotLayout> ReadLerobotLayout(const std::string& input,
                                                const VideoEpisodesImportOptions& options) {
  LerobotLayout layout;
  layout.dir = input;
  while (layout.dir.size() > 1 && layout.dir.back() == '/') layout.dir.pop_back();
  EMBODY_ASSIGN_OR_RETURN(info, ReadInfo(layout.dir, options, layout));
  layout.version = info.version;
  layout.fps = info.fps;
  if (info.version == "v3.0") {
    EMBODY_RETURN_IF_ERROR(ReadEpisodesV3(info, options, layout));
  } else {
    EMBODY_RETURN_IF_ERROR(ReadEpisodesV2(info, options, layout));
  }
  const std::string meta = layout.dir + "/meta";
  if (layout.episodes.empty()) return common::InvalidArgument(meta + ": no episodes");
  std::sort(
      layout.episodes.begin(), layout.episodes.end(),
      [](const LerobotEpisodeRef& a, const LerobotEpisodeRef& b) { return a.index < b.index; });
  for (size_t i = 0; i < layout.episodes.size(); ++i) {
    const LerobotEpisodeRef& ep = layout.episodes[i];
    if (i > 0 && layout.episodes[i - 1].index == ep.index) {
      return common::InvalidArgument(meta + ": episode " + std::to_string(ep.index) +
                                     " is listed twice");
    }
    if (ep.length < 1 || ep.length > options.max_episode_frames) {
      return common::InvalidArgument(meta + ": episode " + std::to_string(ep.index) +
                                     " has length " + std::to_string(ep.length) + ", outside [1, " +
                                     std::to_string(options.max_episode_frames) + "]");
    }
  }
  if (info.total_episodes >= 0 &&
      info.total_episodes != static_cast<int64_t>(layout.episodes.size())) {
    return common::InvalidArgument(
        meta + "/info.json: total_episodes is " + std::to_string(info.total_episodes) +
        ", the episode metadata lists " + std::to_string(layout.episodes.size()));
  }
  return layout;
}

// Decoded files by path; a file is read once by whichever thread asks first, the others wait
// on its future. The oldest entries are dropped past `keep` (readers still holding one keep it
// alive).
struct LerobotDataFiles::Cache {
  using Entry = std::shared_future<common::Result<std::shared_ptr<const FrameTable>>>;
  std::mutex mu;
  size_t keep = 2;
  std::list<std::pair<std::string, Entry>> entries;  // newest first
};

LerobotDataFiles::LerobotDataFiles(size_t keep) : cache_(std::make_unique<Cache>()) {
  cache_->keep = std::max<size_t>(1, keep);
}
LerobotDataFiles::~LerobotDataFiles() = default;

common::Result<LerobotFrames> LerobotDataFiles::Read(const LerobotLayout& layout,
                                                     const LerobotEpisodeRef& ep) {
  Cache::Entry entry;
  std::promise<common::Result<std::shared_ptr<const FrameTable>>> promise;
  bool reader = false;
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = std::find_if(cache_->entries.begin(), cache_->entries.end(),
                           [&](const auto& e) { return e.first == ep.data_path; });
    if (it != cache_->entries.end()) {
      entry = it->second;
    } else {
      entry = promise.get_future().share();
      cache_->entries.emplace_front(ep.data_path, entry);
      if (cache_->entries.size() > cache_->keep) cache_->entries.pop_back();
      reader = true;
    }
  }
  if (reader) promise.set_value(ReadFrameTable(layout, ep.data_path));
  const auto& table_or = entry.get();
  const std::string what = layout.dir + " episode " + std::to_string(ep.index);
  if (!table_or.ok())
    return common::Status(table_or.status().code(), what + ": " + table_or.status().message());
  const FrameTable& t = **table_or;
  auto bad = [&](const std::string& msg) {
    return common::InvalidArgument(what + ": " + t.path + ": " + msg);
  };
  // The episode's rows: one contiguous run of its episode_index.
  auto first = std::find(t.episode_index.begin(), t.episode_index.end(), ep.index);
  if (first == t.episode_index.end()) return bad("no rows with this episode_index");
  const int64_t r0 = first - t.episode_index.begin();
  int64_t n = 0;
  while (r0 + n < t.rows && t.episode_index[static_cast<size_t>(r0 + n)] == ep.index) ++n;
  if (std::find(t.episode_index.begin() + r0 + n, t.episode_index.end(), ep.index) !=
      t.episode_index.end()) {
    return bad("the episode's rows are not contiguous");
  }
  if (n != ep.length) {
    return bad(std::to_string(n) + " rows, the episode metadata says length " +
               std::to_string(ep.length));
  }
  const double period = 1.0 / layout.fps;
  const int64_t index0 = ep.from_index >= 0 ? ep.from_index : t.index[static_cast<size_t>(r0)];
  for (int64_t i = 0; i < n; ++i) {
    const size_t r = static_cast<size_t>(r0 + i);
    if (t.frame_index[r] != i) {
      return bad("row " + std::to_string(r) + ": frame_index is " +
                 std::to_string(t.frame_index[r]) + ", expected " + std::to_string(i) +
                 " (frames missing or out of order)");
    }
    if (t.index[r] != index0 + i) {
      return bad("row " + std::to_string(r) + ": index is " + std::to_string(t.index[r]) +
                 ", expected " + std::to_string(index0 + i));
    }
    if (!(std::fabs(t.timestamp[r] - static_cast<double>(i) * period) <= period)) {
      return bad("row " + std::to_string(r) + ": timestamp " + std::to_string(t.timestamp[r]) +
                 " is more than 1/fps from frame " + std::to_string(i) + " at " +
                 std::to_string(layout.fps) + " fps");
    }
  }
  LerobotFrames out;
  out.length = n;
  const auto a0 = t.action.values.begin() + t.action.offsets[static_cast<size_t>(r0)];
  out.action.assign(a0, a0 + n * layout.action_dim);
  if (layout.state_dim > 0) {
    const auto s0 = t.state.values.begin() + t.state.offsets[static_cast<size_t>(r0)];
    out.state.assign(s0, s0 + n * layout.state_dim);
  }
  return out;
}

}  // namespace storage
