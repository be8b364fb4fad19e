// Read-ahead: background threads read items ahead of the consumer into a bounded buffer, so
// the consumer (the training step) finds its next item ready instead of waiting on disk and
// checksums. Items are delivered in order; at most `capacity` are read but not yet taken, which
// bounds memory. Stop() (or destruction) ends it cleanly at any point: workers finish the item
// in hand, nothing more is read, and Next() then reports the end.
//
// An error reading item i is delivered at position i, in order, and ends the stream.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace storage {

struct ReadAheadOptions {
  int threads = 2;
  size_t capacity = 32;
};

template <typename T>
class ReadAhead {
 public:
  // read(i) produces item i of `count`; it is called from the worker threads, concurrently.
  ReadAhead(uint64_t count, std::function<common::Result<T>(uint64_t)> read,
            ReadAheadOptions options = {})
      : count_(count), read_(std::move(read)), capacity_(std::max<size_t>(1, options.capacity)) {
    for (int i = 0; i < std::max(1, options.threads); ++i)
      workers_.emplace_back([this] { Work(); });
  }
  ~ReadAhead() { Stop(); }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The next item; nullopt after the last one, or after Stop(). A read error is returned once,
  // in the item's place, and ends the stream.
  common::Result<std::optional<T>> Next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (next_deliver_ >= count_ || stopped_) return std::optional<T>();
    if (!ready_.count(next_deliver_)) {
      ++waits_;
      ready_cv_.wait(lock, [&] { return stopped_ || ready_.count(next_deliver_) > 0; });
      if (stopped_) return std::optional<T>();
    }
    auto node = ready_.extract(next_deliver_);
    ++next_deliver_;
    space_cv_.notify_all();
    if (!node.mapped().ok()) {
      stopped_ = true;
      space_cv_.notify_all();
      return node.mapped().status();
    }
    return std::optional<T>(std::move(node.mapped().value()));
  }

  // Idempotent. Joins the workers; items already read are dropped.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    space_cv_.notify_all();
    ready_cv_.notify_all();
    for (auto& w : workers_) {
      if (w.joinable()) w.join();
    }
  }

  // Times Next() found its item not yet read and had to wait.
  uint64_t waits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waits_;
  }
  // Items handed out to workers so far (read or being read).
  uint64_t claimed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return next_claim_;
  }

 private:
  void Work() {
    for (;;) {
      uint64_t i;
      {
        std::unique_lock<std::mutex> lock(mu_);
        space_cv_.wait(lock, [&] {
          return stopped_ || next_claim_ >= count_ || next_claim_ < next_deliver_ + capacity_;
        });
        if (stopped_ || next_claim_ >= count_) return;
        i = next_claim_++;
      }
      common::Result<T> item = read_(i);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_) return;
        ready_.emplace(i, std::move(item));
      }
      ready_cv_.notify_all();
    }
  }

  const uint64_t count_;
  const std::function<common::Result<T>(uint64_t)> read_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable space_cv_, ready_cv_;
  std::map<uint64_t, common::Result<T>> ready_;
  uint64_t next_claim_ = 0, next_deliver_ = 0, waits_ = 0;
  bool stopped_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace storage
