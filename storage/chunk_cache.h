// A bounded LRU of verified chunks shared by a dataset's reader threads. Samples are small
// slices of chunks; without the cache, reading the frames of one chunk one sample at a time
// would read and checksum that chunk once per frame.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace storage {

class ChunkCache {
 public:
  using Key = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;  // shard, episode, key, chunk
  using Chunk = std::shared_ptr<const std::vector<uint8_t>>;

  explicit ChunkCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  Chunk Get(const Key& key);
  // Keeps the chunk unless it alone exceeds the capacity; evicts least recently used ones.
  void Put(const Key& key, Chunk chunk);
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Entry {
    Chunk chunk;
    std::list<Key>::iterator lru;
  };
  mutable std::mutex mu_;
  uint64_t capacity_;
  uint64_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::list<Key> lru_;  // front = most recent
  std::map<Key, Entry> entries_;
};

}  // namespace storage
