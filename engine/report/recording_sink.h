// RecordingSink: an EventSink for tests that keeps every event it is given.
#pragma once

#include <mutex>
#include <vector>

#include "engine/report/event_sink.h"

namespace engine {

class RecordingSink final : public EventSink {
 public:
  void Post(nlohmann::json event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  std::vector<nlohmann::json> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<nlohmann::json> events_;
};

}  // namespace engine
