// The model shape a checkpoint stores (its config's "model"): a checkpoint loads only into a model
// of the same shape, whether a training job resumes from it or an rl job starts its trunk from it.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "engine/model/policy_transformer.h"

namespace engine {

inline nlohmann::json ModelJson(const PolicyConfig& c, size_t num_params) {
  return {{"kind", "policy_transformer"},
          {"d_model", c.d_model},
          {"layers", c.layers},
          {"heads", c.heads},
          {"mlp", c.mlp},
          {"vocab", c.vocab},
          {"max_positions", c.max_positions},
          {"action_dim", c.action_dim},
          {"action_horizon", c.action_horizon},
          {"params", num_params}};
}

}  // namespace engine
