#include "engine/model/policy_options.h"

namespace engine {

common::Result<PolicyConfig> PolicyConfigFromOptions(const api::EngineOptions& e) {
  PolicyConfig c;
  c.d_model = e.model.d_model;
  c.layers = e.model.layers;
  c.heads = e.model.heads;
  c.mlp = e.model.mlp;
  c.action_horizon = e.model.action_horizon;
  c.action_dim = e.model.action_dim;
  c.max_positions = api::kMaxPositions;
  if (e.model.action_head != "flow") {
    return common::InvalidArgument("unknown action head " + e.model.action_head,
                                   "engine.model.action_head");
  }
  if (e.attention == "varlen") {
    c.attention = AttentionKind::kVarlen;
  } else if (e.attention == "padded") {
    c.attention = AttentionKind::kPadded;
  } else {
    return common::InvalidArgument("unknown attention " + e.attention, "engine.attention");
  }
  common::Status s = c.Validate();
  if (!s.ok()) return common::InvalidArgument(s.message(), "engine.model." + s.field());
  return c;
}

Fp8ComputeOptions Fp8ComputeOptionsFrom(const api::Fp8Options& fp8) {
  Fp8ComputeOptions o;
  o.scaling = fp8.scaling == "delayed" ? Fp8Scaling::kDelayed : Fp8Scaling::kBlock;
  o.history = fp8.amax_history;
  return o;
}

}  // namespace engine
