// Writes a dataset directory: episodes go into shards of about `shard_bytes` each (a new shard
// starts when the next episode would push the current one past the target; an episode larger
// than the target gets a shard of its own), statistics are gathered on the way, and Finish()
// writes the manifest.
//
// The directory is built under a temporary name beside the final one (`OUT.tmp-<pid>`) and
// renamed into place by Finish(); a writer destroyed before Finish() removes it. So a failed
// import leaves nothing, and a crash leaves only a *.tmp-* directory no reader opens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "storage/episode.h"
#include "storage/manifest.h"
#include "storage/shard_writer.h"
#include "storage/stats.h"
#include "storage/token_mapping.h"

namespace storage {

struct DatasetWriterOptions {
  uint64_t shard_bytes = 256ull << 20;
  ShardWriterOptions shard;
  TokenMapping mapping;
};

class DatasetWriter {
 public:
  // `dir` must not exist yet; its parent must.
  static common::Result<std::unique_ptr<DatasetWriter>> Create(const std::string& dir,
                                                               DatasetWriterOptions options);
  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // The first episode fixes the dataset's schema. `what` names the episode in errors
  // ("in.hdf5 demo_7").
  common::Status Add(const Episode& episode, const std::string& what);
  // Closes the last shard, writes the manifest (with `source` as its provenance) and renames
  // the directory into place.
  common::Result<DatasetManifest> Finish(nlohmann::json source);

  // The statistics of the episodes added so far (what Finish writes into the manifest).
  DatasetStats stats() const { return stats_.Finish(); }
  uint64_t episodes() const { return stats_episodes_; }
  uint64_t frames() const { return stats_frames_; }
  // Bytes of finished shards plus the open one.
  uint64_t bytes() const;
  const std::string& temp_dir() const { return tmp_dir_; }

 private:
  DatasetWriter(std::string dir, std::string tmp_dir, DatasetWriterOptions options)
      : dir_(std::move(dir)), tmp_dir_(std::move(tmp_dir)), options_(options) {}
  common::Status CloseShard();

  std::string dir_, tmp_dir_;
  DatasetWriterOptions options_;
  DatasetManifest manifest_;
  StatsAccumulator stats_;
  std::unique_ptr<ShardWriter> shard_;
  uint64_t finished_bytes_ = 0;
  uint64_t stats_episodes_ = 0, stats_frames_ = 0;
  bool done_ = false;
};

}  // namespace storage
