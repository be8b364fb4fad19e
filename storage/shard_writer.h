// Writes one shard file (shard_format.h): episodes stream straight to disk as they are added,
// only the index stays in memory, and the file appears under its name only after Finish().
// An abandoned writer (error, or destroyed before Finish) leaves no file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"
#include "storage/file.h"
#include "storage/shard_format.h"

namespace storage {

struct ShardWriterOptions {
  // Target chunk size: a key's rows are cut into chunks of ⌊chunk_bytes / frame_bytes⌋ frames
  // (at least one). Smaller chunks make a random sample cheaper to read and verify; larger ones
  // make the index smaller.
  uint64_t chunk_bytes = 1 << 20;
};

class ShardWriter {
 public:
  // Every episode added must have exactly `schema` (names, order, dtypes, frame shapes).
  static common::Result<std::unique_ptr<ShardWriter>> Create(const std::string& path, Schema schema,
                                                             ShardWriterOptions options = {});

  // `sample_tokens` has one count per frame. `what` names the episode in errors.
  common::Status Add(const Episode& episode, std::vector<uint32_t> sample_tokens,
                     const std::string& what);
  // Writes index and footer, fsyncs and renames into place. Returns the shard's index CRC.
  common::Result<uint32_t> Finish();

  // Bytes written so far plus the index that Finish() would add: the size the shard will have.
  uint64_t size() const;
  size_t episodes() const { return index_.episodes.size(); }
  uint64_t frames() const { return frames_; }
  const std::string& path() const { return file_->path(); }

 private:
  ShardWriter(std::unique_ptr<common::AtomicWritableFile> file, Schema schema, ShardWriterOptions options);

  std::unique_ptr<common::AtomicWritableFile> file_;
  ShardWriterOptions options_;
  ShardIndex index_;
  uint64_t index_bytes_ = 0;  // running size of the encoded index
  uint64_t frames_ = 0;
};

}  // namespace storage
