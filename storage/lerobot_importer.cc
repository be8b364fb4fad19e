#include "storage/lerobot_importer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "storage/lerobot_dataset_internal.h"
#include "storage/read_ahead.h"

namespace storage {

namespace {

using lerobot_internal::EpisodeName;
using lerobot_internal::F32Array;
using lerobot_internal::PlainName;

namespace fs = std::filesystem;

constexpr size_t kMaxTaskBytes = 64 << 10;
constexpr int64_t kMaxEpisodeIndex = 1000000000;

// One line of episodes.jsonl, checked and converted.
struct LowDimEpisode {
  int64_t index = 0;
  int64_t length = 0;
  int64_t line = 0;
  std::string task;
  int action_dim = 0, state_dim = 0;
  std::vector<float> action, state;  // (length, dim), row-major
};

struct Camera {
  std::string dir;  // name of the directory under videos/
  std::string key;  // obs/<name>
};

std::string VideoPath(const std::string& dir, const Camera& cam, int64_t index) {
  return dir + "/videos/" + cam.dir + "/" + EpisodeName(index) + ".mp4";
}

common::Result<std::vector<Camera>> FindCameras(const std::string& dir) {
  const std::string videos = dir + "/videos";
  std::error_code ec;
  if (!fs::is_directory(videos, ec)) {
    return common::InvalidArgument(dir + ": no videos/ directory (expected videos/<camera>/)");
  }
  std::vector<Camera> cams;
  std::set<std::string> keys;
  for (const auto& e : fs::directory_iterator(videos, ec)) {
    if (!e.is_directory()) continue;
    std::string name = e.path().filename().string();
    if (!PlainName(name)) {
      return common::InvalidArgument(videos + ": camera directory name '" + name +
                                     "' is not a plain name ([A-Za-z0-9._-], up to 128)");
    }
    std::string key = name;
    const std::string lerobot_prefix = "observation.images.";
    if (key.rfind(lerobot_prefix, 0) == 0 && key.size() > lerobot_prefix.size())
      key = key.substr(lerobot_prefix.size());
    key = "obs/" + key;
    if (key == "obs/state" || !keys.insert(key).second) {
      return common::InvalidArgument(videos + "/" + name + ": camera key " + key +
                                     " collides with another key");
    }
    cams.push_back({name, key});
  }
  if (ec) return common::Internal(videos + ": " + ec.message());
  if (cams.empty()) return common::InvalidArgument(videos + ": no camera directories");
  std::sort(cams.begin(), cams.end(),
            [](const Camera& a, const Camera& b) { return a.key < b.key; });
  return cams;
}

// Reads one line of at most `max` bytes; nullopt at the end of the file.
common::Result<std::optional<std::string>> ReadLine(std::istream& in, uint64_t max,
                                                    const std::string& what) {
  std::string line;
  std::streambuf* buf = in.rdbuf();
  for (;;) {
    int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      if (line.empty()) return std::optional<std::string>();
      break;
    }
    if (c == '\n') break;
    if (line.size() >= max) {
      return common::InvalidArgument(what + ": longer than " + std::to_string(max) + " bytes");
    }
    line.push_back(static_cast<char>(c));
  }
  return std::optional<std::string>(std::move(line));
}

// `length` rows of `dim` finite f32 values; `dim` is the first row's width when 0.
common::Status ReadRows(const nlohmann::json& rows, const std::string& field, int64_t length,
                        int max_dim, const std::string& what, int& dim, std::vector<float>& out) {
  auto bad = [&](const std::string& msg) { return common::InvalidArgument(what + ": " + msg); };
  if (!rows.is_array()) return bad(field + " must be a list of per-frame lists");
  if (static_cast<int64_t>(rows.size()) != length) {
    return bad(field + " has " + std::to_string(rows.size()) + " rows, length is " +
               std::to_string(length));
  }
  for (size_t t = 0; t < rows.size(); ++t) {
    const auto& row = rows[t];
    if (!row.is_array()) return bad(field + " row " + std::to_string(t) + " is not a list");
    if (t == 0) {
      if (row.empty() || row.size() > static_cast<size_t>(max_dim)) {
        return bad(field + " rows must have 1 to " + std::to_string(max_dim) + " values, found " +
                   std::to_string(row.size()));
      }
      if (dim != 0 && static_cast<int>(row.size()) != dim) {
        return bad(field + " has " + std::to_string(row.size()) +
                   " values per row, the first episode has " + std::to_string(dim));
      }
      dim = static_cast<int>(row.size());
      out.reserve(static_cast<size_t>(length) * dim);
    }
    if (static_cast<int>(row.size()) != dim) {
      return bad(field + " row " + std::to_string(t) + " has " + std::to_string(row.size()) +
                 " values, row 0 has " + std::to_string(dim));
    }
    for (size_t i = 0; i < row.size(); ++i) {
      const auto& v = row[i];
      float x = v.is_number() ? static_cast<float>(v.get<double>()) : NAN;
      if (!std::isfinite(x)) {
        return bad(field + " row " + std::to_string(t) + " element " + std::to_string(i) +
                   " is not a finite f32 number");
      }
      out.push_back(x);
    }
  }
  return common::Status::Ok();
}

common::Result<LowDimEpisode> ParseLine(const std::string& text, int64_t line_no,
                                        const std::string& path,
                                        const VideoEpisodesImportOptions& options,
                                        const LowDimEpisode* first) {
  std::string what = path + " line " + std::to_string(line_no);
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return common::InvalidArgument(what + ": not a JSON object");
  }
  LowDimEpisode ep;
  ep.line = line_no;
  auto int_field = [&](const char* name, int64_t lo, int64_t hi) -> common::Result<int64_t> {
    if (!j.contains(name) || !j[name].is_number_integer()) {
      return common::InvalidArgument(what + ": " + name + " must be an integer");
    }
    int64_t v = j[name].get<int64_t>();
    if (v < lo || v > hi) {
      return common::InvalidArgument(what + ": " + name + " " + std::to_string(v) +
                                     " is outside [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
    }
    return v;
  };
  EMBODY_ASSIGN_OR_RETURN(index, int_field("episode_index", 0, kMaxEpisodeIndex));
  ep.index = index;
  what += " (episode " + std::to_string(index) + ")";
  if (j.contains("length") && j["length"].is_number_integer() &&
      j["length"].get<int64_t>() > options.max_episode_frames) {
    return common::InvalidArgument(what + ": " + std::to_string(j["length"].get<int64_t>()) +
                                   " frames, more than the maximum of " +
                                   std::to_string(options.max_episode_frames));
  }
  EMBODY_ASSIGN_OR_RETURN(length, int_field("length", 1, options.max_episode_frames));
  ep.length = length;
  if (j.contains("task")) {
    if (!j["task"].is_string()) return common::InvalidArgument(what + ": task must be a string");
    ep.task = j["task"].get<std::string>();
  } else if (j.contains("tasks")) {
    if (!j["tasks"].is_array()) {
      return common::InvalidArgument(what + ": tasks must be a list of strings");
    }
    for (const auto& t : j["tasks"]) {
      if (!t.is_string())
        return common::InvalidArgument(what + ": tasks must be a list of strings");
      if (!ep.task.empty()) ep.task += "; ";
      ep.task += t.get<std::string>();
    }
  }
  if (ep.task.size() > kMaxTaskBytes) {
    return common::InvalidArgument(what + ": task is longer than " + std::to_string(kMaxTaskBytes) +
                                   " bytes");
  }
  if (!j.contains("action")) return common::InvalidArgument(what + ": no action field");
  ep.action_dim = first ? first->action_dim : 0;
  EMBODY_RETURN_IF_ERROR(ReadRows(j["action"], "action", ep.length, options.max_low_dim, what,
                                  ep.action_dim, ep.action));
  bool has_state = j.contains("observation.state");
  if (first && has_state != (first->state_dim > 0)) {
    return common::InvalidArgument(what + (has_state ? ": has" : ": has no") +
                                   " observation.state, the first episode " +
                                   (has_state ? "has none" : "has it"));
  }
  if (has_state) {
    ep.state_dim = first ? first->state_dim : 0;
    EMBODY_RETURN_IF_ERROR(ReadRows(j["observation.state"], "observation.state", ep.length,
                                    options.max_low_dim, what, ep.state_dim, ep.state));
  }
  return ep;
}

common::Result<std::vector<LowDimEpisode>> ReadEpisodesFile(
    const std::string& path, const VideoEpisodesImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return common::InvalidArgument(path + ": cannot open (no episodes.jsonl?)");
  std::vector<LowDimEpisode> eps;
  std::map<int64_t, int64_t> line_of;  // episode_index -> line
  for (int64_t line_no = 1;; ++line_no) {
    EMBODY_ASSIGN_OR_RETURN(
        line, ReadLine(in, options.max_line_bytes, path + " line " + std::to_string(line_no)));
    if (!line) break;
    if (line->find_first_not_of(" \t\r") == std::string::npos) continue;
    if (static_cast<int64_t>(eps.size()) >= options.max_episodes) {
      return common::InvalidArgument(path + ": more than " + std::to_string(options.max_episodes) +
                                     " episodes");
    }
    EMBODY_ASSIGN_OR_RETURN(
        ep, ParseLine(*line, line_no, path, options, eps.empty() ? nullptr : &eps.front()));
    auto [it, fresh] = line_of.emplace(ep.index, line_no);
    if (!fresh) {
      return common::InvalidArgument(path + " line " + std::to_string(line_no) + " (episode " +
                                     std::to_string(ep.index) + "): episode_index repeats line " +
                                     std::to_string(it->second));
    }
    eps.push_back(std::move(ep));
  }
  if (in.bad()) return common::Internal(path + ": read error");
  if (eps.empty()) return common::InvalidArgument(path + ": no episodes");
  std::sort(eps.begin(), eps.end(),
            [](const LowDimEpisode& a, const LowDimEpisode& b) { return a.index < b.index; });
  return eps;
}

// Builds episode `e`: its low-dim arrays, and every camera's video decoded to RGB.
common::Result<Episode> BuildEpisode(const std::string& dir, const LowDimEpisode& low,
                                     const std::vector<Camera>& cams, const std::string& language,
                                     const VideoEpisodesImportOptions& options) {
  const std::string what = dir + " episode " + std::to_string(low.index) + " (length " +
                           std::to_string(low.length) + ")";
  Episode ep;
  ep.arrays.push_back(F32Array("actions", low.action_dim, low.length, low.action));
  if (low.state_dim > 0)
    ep.arrays.push_back(F32Array("obs/state", low.state_dim, low.length, low.state));
  VideoDecodeOptions vo = options.video;
  vo.max_frames = std::min(vo.max_frames, low.length);
  for (const Camera& cam : cams) {
    const std::string path = VideoPath(dir, cam, low.index);
    auto v = DecodeVideo(path, vo);
    if (!v.ok()) return common::InvalidArgument(what + ": " + v.status().message());
    if (v->frames != low.length) {
      return common::InvalidArgument(what + ": " + path + " has " + std::to_string(v->frames) +
                                     " frames, the episode's length is " +
                                     std::to_string(low.length));
    }
    Array a;
    a.spec = {cam.key, DType::kU8, {v->height, v->width, 3}};
    a.frames = v->frames;
    a.data = std::move(v->rgb);
    ep.arrays.push_back(std::move(a));
  }
  std::sort(ep.arrays.begin(), ep.arrays.end(),
            [](const Array& a, const Array& b) { return a.spec.name < b.spec.name; });
  ep.attributes.emplace_back(kAttrDemoName, EpisodeName(low.index));
  ep.attributes.emplace_back(kAttrSourceFile, dir);
  const std::string& lang = language.empty() ? low.task : language;
  if (!lang.empty()) ep.attributes.emplace_back(kAttrLanguage, lang);
  return ep;
}

}  // namespace

common::Result<ImportResult> ImportVideoEpisodes(const std::string& input,
                                                 const std::string& out_dir,
                                                 const VideoEpisodesImportOptions& options) {
  auto start = std::chrono::steady_clock::now();
  std::string dir = input;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return common::InvalidArgument(dir + ": not a directory");
  if (options.threads < 1 || options.threads > 256) {
    return common::InvalidArgument("threads must be in [1, 256]", "threads");
  }
  EMBODY_ASSIGN_OR_RETURN(cams, FindCameras(dir));
  EMBODY_ASSIGN_OR_RETURN(low, ReadEpisodesFile(dir + "/episodes.jsonl", options));
  // Every video must be there before hours go into decoding the others.
  for (const LowDimEpisode& e : low) {
    for (const Camera& cam : cams) {
      std::string path = VideoPath(dir, cam, e.index);
      if (!fs::is_regular_file(path, ec)) {
        return common::InvalidArgument(dir + " episode " + std::to_string(e.index) +
                                       ": missing video " + path);
      }
    }
  }

  EMBODY_ASSIGN_OR_RETURN(writer, DatasetWriter::Create(out_dir, options.writer));
  // Declared after the writer, so it stops (joining its decoders) before the writer removes
  // its temporary directory on an error.
  ReadAhead<Episode> decoded(
      low.size(),
      [&](uint64_t i) { return BuildEpisode(dir, low[i], cams, options.language, options); },
      {.threads = options.threads, .capacity = static_cast<size_t>(options.threads) + 1});
  ImportResult result;
  ImportProgress progress;
  progress.demos_total = low.size();
  std::map<std::string, KeySpec> first;  // camera key -> the first episode's spec
  for (size_t i = 0; i < low.size(); ++i) {
    EMBODY_ASSIGN_OR_RETURN(ep, decoded.Next());
    if (!ep) return common::Internal("video decoding stopped early");
    for (const Array& a : ep->arrays) {
      if (a.spec.dtype != DType::kU8) continue;
      auto [it, fresh] = first.emplace(a.spec.name, a.spec);
      if (!fresh && !(it->second == a.spec)) {
        const Camera& cam = *std::find_if(cams.begin(), cams.end(),
                                          [&](const Camera& c) { return c.key == a.spec.name; });
        return common::InvalidArgument(
            dir + " episode " + std::to_string(low[i].index) + ": " +
            VideoPath(dir, cam, low[i].index) + " is " + std::to_string(a.spec.frame_shape[1]) +
            "x" + std::to_string(a.spec.frame_shape[0]) + ", the first episode's is " +
            std::to_string(it->second.frame_shape[1]) + "x" +
            std::to_string(it->second.frame_shape[0]) + " (resize makes them one size)");
      }
    }
    progress.demos_done = i + 1;
    progress.frames += static_cast<uint64_t>(ep->frames());
    for (const Array& a : ep->arrays) progress.bytes += a.data.size();
    EMBODY_RETURN_IF_ERROR(writer->Add(*ep, dir + " " + EpisodeName(low[i].index)));
    if (options.progress) options.progress(progress);
  }
  nlohmann::json source = {{"type", "video"}, {"path", dir}};
  if (!options.source_archive.empty()) {
    source["path"] = options.source_archive;
    source["archive"] = "tar";
  }
  for (const Camera& cam : cams) source["cameras"][cam.key] = "videos/" + cam.dir;
  if (options.video.width > 0) source["resize"] = {options.video.height, options.video.width};
  if (!options.language.empty()) source["language_instruction"] = options.language;
  EMBODY_RETURN_IF_ERROR(FinishImport(*writer, std::move(source), start, &result));
  return result;
}

}  // namespace storage
