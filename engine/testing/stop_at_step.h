// StopAtStep: an event sink that raises a run's stop flag once the step event of update `at` is
// posted, so a test stops a run between two chosen updates as SIGTERM would (the rl tests, one
// rank and several).
#pragma once

#include <atomic>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/report/event_sink.h"

namespace engine::testing {

class StopAtStep final : public EventSink {
 public:
  StopAtStep(std::atomic<bool>* stop, int64_t at) : stop_(stop), at_(at) {}
  void Post(nlohmann::json event) override {
    if (event.value("type", "") == "step" && event.value("step", int64_t{0}) == at_) {
      stop_->store(true);
    }
  }

 private:
  std::atomic<bool>* stop_;
  int64_t at_;
};

}  // namespace engine::testing
