// Reads one shard file (shard_format.h). Open() checks header, footer and index checksum and
// bounds every index entry, so a truncated or damaged shard fails there, naming the file. Data
// is verified chunk by chunk as it is read: a mismatch names the file, the episode (and its
// demo name), the key and the chunk. A ShardReader is immutable after Open and safe to use from
// many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"
#include "storage/file.h"
#include "storage/shard_format.h"

namespace storage {

class ShardReader {
 public:
  static common::Result<std::unique_ptr<ShardReader>> Open(const std::string& path);

  const ShardIndex& index() const { return index_; }
  const Schema& schema() const { return index_.schema; }
  size_t episodes() const { return index_.episodes.size(); }
  uint32_t index_crc() const { return index_crc_; }
  uint64_t file_size() const { return file_->size(); }
  const std::string& path() const { return file_->path(); }

  // Bytes of chunk `chunk` of key `key` of episode `episode`, verified.
  common::Result<std::vector<uint8_t>> ReadChunk(size_t episode, size_t key, size_t chunk) const;
  // A whole episode, every chunk verified.
  common::Result<Episode> ReadEpisode(size_t episode) const;
  // Reads every chunk of every episode and checks its checksum; `progress` gets bytes checked.
  common::Status VerifyAll(const std::function<void(uint64_t)>& progress = nullptr) const;

  // "shard-00001.embs episode 3 (demo_4)": how errors name an episode.
  std::string Describe(size_t episode) const;

 private:
  ShardReader(std::unique_ptr<RandomAccessFile> file, ShardIndex index, uint32_t crc)
      : file_(std::move(file)), index_(std::move(index)), index_crc_(crc) {}
  // Checks `size` bytes at `data` against chunk `chunk`'s CRC.
  common::Status CheckChunk(size_t episode, size_t key, size_t chunk, const uint8_t* data,
                            size_t size, uint64_t offset) const;

  std::unique_ptr<RandomAccessFile> file_;
  ShardIndex index_;
  uint32_t index_crc_ = 0;
};

}  // namespace storage
