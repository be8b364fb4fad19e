// Reads a dataset directory (dataset_writer.h): the manifest, then every shard it names, each
// checked at open against the manifest (index checksum, episode and frame counts, schema).
// Episodes are numbered 0..E-1 across shards in manifest order; samples (one per frame) are
// numbered 0..N-1 in episode order. Token counts come from the shard indexes without reading
// data. Reads are verified chunk by chunk and go through a shared chunk cache; a Dataset is safe
// to use from many threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/chunk_cache.h"
#include "storage/episode.h"
#include "storage/manifest.h"
#include "storage/read_ahead.h"
#include "storage/shard_reader.h"

namespace storage {

struct DatasetReaderOptions {
  uint64_t cache_bytes = 64ull << 20;
  // The key whose rows t .. t+action_horizon-1 make a sample's action chunk.
  std::string action_key = "actions";
};

// One training sample: every key at frame t, and the action chunk that follows it.
struct Sample {
  uint64_t index = 0;         // global sample number
  uint64_t episode = 0;       // global episode number
  uint32_t frame = 0;         // t
  uint32_t tokens = 0;        // from the index
  std::vector<Array> values;  // one row (frames = 1) per key, schema order
  // Rows t .. min(T, t+H)-1 of the action key (frames = how many exist; fewer near the end).
  Array action_chunk;
};

class Dataset {
 public:
  static common::Result<std::unique_ptr<Dataset>> Open(const std::string& dir,
                                                       DatasetReaderOptions options = {});

  const DatasetManifest& manifest() const { return manifest_; }
  const Schema& schema() const { return manifest_.schema; }
  uint64_t episodes() const { return episode_shard_.size(); }
  uint64_t samples() const { return sample_begin_.back(); }
  uint64_t files_opened() const { return shards_.size() + 1; }  // shards + manifest

  uint32_t EpisodeFrames(uint64_t episode) const;
  uint64_t EpisodeFirstSample(uint64_t episode) const { return sample_begin_[episode]; }
  const std::vector<std::pair<std::string, std::string>>& EpisodeAttributes(uint64_t episode) const;
  // Token count of a sample, from the index (no data read).
  uint32_t SampleTokens(uint64_t sample) const;
  // (episode, frame) of a global sample number.
  std::pair<uint64_t, uint32_t> Locate(uint64_t sample) const;

  common::Result<Episode> ReadEpisode(uint64_t episode) const;
  common::Result<Sample> ReadSample(uint64_t sample) const;
  // Rows [begin, end) of schema key `key` of an episode into out (FrameBytes() per row), verified
  // and cached like every read: what a loader uses to read only the keys it needs.
  common::Status ReadKeyRows(uint64_t episode, size_t key, uint32_t begin, uint32_t end,
                             uint8_t* out) const;
  // Reads every chunk of every shard and checks its checksum; `progress` gets bytes checked.
  common::Status Verify(const std::function<void(uint64_t)>& progress = nullptr) const;

  // Errors name episodes as "<shard path> episode <local> (<demo>)".
  std::string DescribeEpisode(uint64_t episode) const;
  const ChunkCache& cache() const { return cache_; }

 private:
  Dataset(std::string dir, DatasetManifest m, DatasetReaderOptions o)
      : dir_(std::move(dir)),
        manifest_(std::move(m)),
        options_(std::move(o)),
        cache_(options_.cache_bytes) {}
  // Rows [begin, end) of key `key` of an episode into `out`, through the cache.
  common::Status ReadRows(uint64_t episode, size_t key, uint32_t begin, uint32_t end,
                          uint8_t* out) const;
  const EpisodeEntry& Entry(uint64_t episode) const;

  std::string dir_;
  DatasetManifest manifest_;
  DatasetReaderOptions options_;
  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<uint32_t> episode_shard_;  // global episode -> shard
  std::vector<uint32_t> episode_local_;  // global episode -> index inside its shard
  std::vector<uint64_t> sample_begin_;   // global episode -> first sample; back() = samples
  int action_key_ = -1;                  // schema index, -1 when the schema has none
  mutable ChunkCache cache_;
};

// Read-ahead over `order` (e.g. this rank's Partition for the epoch): samples come out in that
// order, read by background threads. `ds` must outlive the stream.
std::unique_ptr<ReadAhead<Sample>> StreamSamples(const Dataset& ds, std::vector<uint64_t> order,
                                                 ReadAheadOptions options = {});

}  // namespace storage
