// A LeRobot dataset's episode metadata, resolved to the files that hold each episode: v2.x's
// meta/episodes.jsonl (one data file and one video per camera per episode, paths from info.json's
// templates) and v3.0's meta/episodes/**/*.parquet (many episodes per file, with their ranges).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/parse_int.h"
#include "storage/lerobot_dataset_internal.h"

namespace storage::lerobot_internal {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxEpisodesJsonlBytes = uint64_t{1} << 30;
constexpr size_t kMaxTaskBytes = 64 << 10;
constexpr int64_t kMaxIndex = 1000000000;

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

}  // namespace

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

}  // namespace storage::lerobot_internal
