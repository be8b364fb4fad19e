// The dataset-level manifest, `dataset.json` in a dataset directory: which shards hold the
// episodes (in order), the schema, the token mapping the index counts were made with, where the
// data came from, and the statistics. Written last and atomically, so a directory with a manifest
// is a complete dataset. The same document is what the control plane will keep per dataset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/episode.h"
#include "storage/stats.h"
#include "storage/token_mapping.h"

namespace storage {

inline constexpr char kManifestFile[] = "dataset.json";
inline constexpr int kManifestVersion = 1;

struct ShardInfo {
  std::string file;  // a plain file name inside the dataset directory
  uint64_t first_episode = 0;
  uint64_t episodes = 0;
  uint64_t frames = 0;
  uint64_t bytes = 0;
  uint32_t index_crc = 0;  // ties the manifest to this exact shard
};

struct DatasetManifest {
  Schema schema;
  TokenMapping mapping;
  std::vector<ShardInfo> shards;
  DatasetStats stats;
  // Importer-specific provenance, kept verbatim: {"type":"hdf5","path":…,"env_args":…}.
  nlohmann::json source = nlohmann::json::object();

  nlohmann::json ToJson() const;
  // Validates everything a reader relies on: plain shard names, consecutive episode ranges,
  // counts that add up to the statistics.
  static common::Result<DatasetManifest> FromJson(const nlohmann::json& j);
};

common::Status WriteManifest(const std::string& dir, const DatasetManifest& m);
common::Result<DatasetManifest> ReadManifest(const std::string& dir);

}  // namespace storage
