#include "storage/chunk_cache.h"

namespace storage {

ChunkCache::Chunk ChunkCache::Get(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.chunk;
}

void ChunkCache::Put(const Key& key, Chunk chunk) {
  if (!chunk || chunk->size() > capacity_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.count(key)) return;  // another thread read it meanwhile
  while (bytes_ + chunk->size() > capacity_ && !lru_.empty()) {
    auto victim = entries_.find(lru_.back());
    bytes_ -= victim->second.chunk->size();
    entries_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  bytes_ += chunk->size();
  entries_.emplace(key, Entry{std::move(chunk), lru_.begin()});
}

uint64_t ChunkCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t ChunkCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace storage
