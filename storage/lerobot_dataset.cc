// LeRobot layouts: meta/info.json and its features, and ReadLerobotLayout, which checks the
// episode metadata (read in lerobot_episodes.cc) against them. An episode's low-dim rows are read
// in lerobot_frames.cc; the import itself (videos, writer) is lerobot_import.cc.
#include "storage/lerobot_dataset.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "storage/lerobot_dataset_internal.h"

namespace storage {

namespace lerobot_internal {

namespace fs = std::filesystem;

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

std::string EpisodeName(int64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "episode_%06lld", static_cast<long long>(index));
  return name;
}

Array F32Array(const std::string& key, int dim, int64_t frames, const std::vector<float>& v) {
  Array a;
  a.spec = {key, DType::kF32, {dim}};
  a.frames = frames;
  a.data.resize(v.size() * sizeof(float));
  std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

}  // namespace lerobot_internal

namespace {

namespace fs = std::filesystem;
using lerobot_internal::Info;
using lerobot_internal::PlainName;
using lerobot_internal::ReadSmallFile;
using nlohmann::json;

constexpr uint64_t kMaxInfoBytes = 16 << 20;
constexpr size_t kMaxFeatures = 4096;

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

}  // namespace

using lerobot_internal::ReadEpisodesV2;
using lerobot_internal::ReadEpisodesV3;

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

}  // namespace storage
