#include "storage/manifest.h"

#include "common/file_util.h"

namespace storage {

nlohmann::json DatasetManifest::ToJson() const {
  nlohmann::json keys = nlohmann::json::array();
  for (const KeySpec& k : schema) {
    keys.push_back({{"name", k.name}, {"dtype", DTypeName(k.dtype)}, {"shape", k.frame_shape}});
  }
  nlohmann::json shard_list = nlohmann::json::array();
  for (const ShardInfo& s : shards) {
    shard_list.push_back({{"file", s.file},
                          {"first_episode", s.first_episode},
                          {"episodes", s.episodes},
                          {"frames", s.frames},
                          {"bytes", s.bytes},
                          {"index_crc32", s.index_crc}});
  }
  return {{"format", "embody-dataset"},
          {"version", kManifestVersion},
          {"keys", keys},
          {"token_mapping",
           {{"patch_size", mapping.patch_size},
            {"proprio_tokens_per_frame", mapping.proprio_tokens_per_frame},
            {"history_frames", mapping.history_frames},
            {"action_horizon", mapping.action_horizon},
            {"max_language_tokens", mapping.max_language_tokens}}},
          {"shards", shard_list},
          {"stats", stats.ToJson()},
          {"source", source}};
}

common::Result<DatasetManifest> DatasetManifest::FromJson(const nlohmann::json& j) {
  DatasetManifest m;
  try {
    if (j.at("format").get<std::string>() != "embody-dataset") {
      return common::InvalidArgument("manifest: not an embody dataset", "format");
    }
    if (j.at("version").get<int>() != kManifestVersion) {
      return common::InvalidArgument("manifest: unsupported version", "version");
    }
    for (const auto& k : j.at("keys")) {
      KeySpec ks;
      ks.name = k.at("name").get<std::string>();
      auto dt = DTypeFromName(k.at("dtype").get<std::string>());
      if (!dt) return common::InvalidArgument("manifest: unknown dtype", "keys.dtype");
      ks.dtype = *dt;
      ks.frame_shape = k.at("shape").get<std::vector<int64_t>>();
      m.schema.push_back(std::move(ks));
    }
    const auto& tm = j.at("token_mapping");
    m.mapping.patch_size = tm.at("patch_size").get<int>();
    m.mapping.proprio_tokens_per_frame = tm.at("proprio_tokens_per_frame").get<int>();
    m.mapping.history_frames = tm.at("history_frames").get<int>();
    m.mapping.action_horizon = tm.at("action_horizon").get<int>();
    m.mapping.max_language_tokens = tm.at("max_language_tokens").get<int>();
    EMBODY_RETURN_IF_ERROR(m.mapping.Validate());
    uint64_t next_episode = 0, frames = 0;
    for (const auto& s : j.at("shards")) {
      ShardInfo si;
      si.file = s.at("file").get<std::string>();
      si.first_episode = s.at("first_episode").get<uint64_t>();
      si.episodes = s.at("episodes").get<uint64_t>();
      si.frames = s.at("frames").get<uint64_t>();
      si.bytes = s.at("bytes").get<uint64_t>();
      si.index_crc = s.at("index_crc32").get<uint32_t>();
      // A manifest names files inside its own directory and nowhere else.
      if (si.file.empty() || si.file.find('/') != std::string::npos || si.file == "." ||
          si.file == "..") {
        return common::InvalidArgument("manifest: bad shard file name " + si.file, "shards.file");
      }
      if (si.first_episode != next_episode || si.episodes == 0) {
        return common::InvalidArgument(
            "manifest: shard " + si.file + " episode range is not contiguous",
            "shards.first_episode");
      }
      next_episode += si.episodes;
      frames += si.frames;
      m.shards.push_back(std::move(si));
    }
    EMBODY_ASSIGN_OR_RETURN(stats, DatasetStats::FromJson(j.at("stats")));
    m.stats = std::move(stats);
    if (m.stats.episodes != next_episode || m.stats.frames != frames) {
      return common::InvalidArgument("manifest: shard counts do not add up to the statistics",
                                     "stats");
    }
    if (j.contains("source")) m.source = j.at("source");
  } catch (const nlohmann::json::exception& e) {
    return common::InvalidArgument(std::string("manifest: ") + e.what());
  }
  return m;
}

common::Status WriteManifest(const std::string& dir, const DatasetManifest& m) {
  return common::WriteFileAtomic(dir + "/" + kManifestFile, m.ToJson().dump(2) + "\n");
}

common::Result<DatasetManifest> ReadManifest(const std::string& dir) {
  std::string path = dir + "/" + kManifestFile;
  EMBODY_ASSIGN_OR_RETURN(text, common::ReadFile(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return common::InvalidArgument(path + ": not valid JSON");
  auto m = DatasetManifest::FromJson(j);
  if (!m.ok()) return common::InvalidArgument(path + ": " + m.status().message());
  return m;
}

}  // namespace storage
