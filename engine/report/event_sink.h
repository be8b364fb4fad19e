// EventSink: where the trainer sends job events ({"type":"step",...}, {"type":"checkpoint",...};
// see docs/contracts.md, "Agent <-> job"). The HTTP implementation posts them to the local agent;
// tests record them. Post must be cheap and must never block training on the network.
#pragma once

#include <nlohmann/json.hpp>

namespace engine {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Post(nlohmann::json event) = 0;
};

}  // namespace engine
