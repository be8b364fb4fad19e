#include "engine/policy/rl_checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "common/file_util.h"
#include "common/log.h"

#include "engine/format/checkpoint_model.h"
#include "engine/model/policy_options.h"

namespace engine {

CheckpointData RlPolicyCheckpoint(ActorCritic& policy, const api::EngineOptions& engine,
                                  int64_t step, int world_size) {
  PolicyTransformer& trunk = policy.trunk();
  const std::vector<float>& heads = policy.heads();
  api::JobSpec spec;
  spec.kind = api::JobKind::kRl;
  spec.engine = engine;
  CheckpointData d;
  d.step = step;
  d.config = {{"kind", "rl"},
              {"engine", api::ToJson(spec)["engine"]},
              {"model", ModelJson(trunk.config(), trunk.num_params())},
              {"heads", heads.size()},
              {"world_size", world_size}};
  d.params.assign(trunk.params(), trunk.params() + trunk.num_params());
  d.params.insert(d.params.end(), heads.begin(), heads.end());
  d.adam_m.assign(d.params.size(), 0.0f);
  d.adam_v.assign(d.params.size(), 0.0f);
  return d;
}

common::Result<std::string> SaveRlPolicy(const std::string& dir, ActorCritic& policy,
                                         const api::EngineOptions& engine, int64_t step,
                                         int world_size, EventSink* events) {
  EMBODY_RETURN_IF_ERROR(common::MakeDirs(dir));
  const std::string abs = std::filesystem::absolute(dir).lexically_normal().string();
  const std::string path = CheckpointPath(abs, step);
  EMBODY_ASSIGN_OR_RETURN(bytes,
                          SaveCheckpoint(path, RlPolicyCheckpoint(policy, engine, step, world_size)));
  common::LogInfo("rl policy written", {{"path", path}, {"bytes", std::to_string(bytes)}});
  if (events != nullptr) {
    events->Post({{"type", "checkpoint"}, {"step", step}, {"path", path}, {"bytes", bytes}});
  }
  return path;
}

bool IsRlPolicyCheckpoint(const CheckpointData& c) {
  return c.config.is_object() && c.config.value("kind", "") == "rl";
}

common::Result<LoadedRlPolicy> LoadRlPolicy(const CheckpointData& c) {
  if (!IsRlPolicyCheckpoint(c)) return common::InvalidArgument("not an rl policy checkpoint");
  if (!c.config.contains("engine") || !c.config["engine"].is_object()) {
    return common::InvalidArgument("the rl checkpoint's config has no engine options");
  }
  // Validated exactly as the job's spec was.
  const nlohmann::json spec = {
      {"name", "rl-policy"},
      {"kind", "rl"},
      {"resources", {{"nodes", 1}, {"ranks_per_node", 1}, {"slot_type", "cpu"}}},
      {"engine", c.config["engine"]}};
  auto parsed = api::ParseJobSpec(spec, api::SpecLimits{});
  if (!parsed.ok()) {
    return common::InvalidArgument("the rl checkpoint's engine options: " +
                                   parsed.status().ToString());
  }
  LoadedRlPolicy out;
  out.engine = parsed->engine;
  EMBODY_ASSIGN_OR_RETURN(config, PolicyConfigFromOptions(out.engine));
  EMBODY_ASSIGN_OR_RETURN(
      policy, ActorCritic::Create(config, out.engine.seed,
                                  static_cast<float>(out.engine.rl.init_log_std)));
  PolicyTransformer& trunk = policy->trunk();
  std::vector<float>& heads = policy->heads();
  if (c.params.size() != trunk.num_params() + heads.size() ||
      !SameTrunkShape(config, c.config.value("model", nlohmann::json()))) {
    return common::InvalidArgument("the rl checkpoint holds " + std::to_string(c.params.size()) +
                                   " floats; its model needs " +
                                   std::to_string(trunk.num_params()) + " + " +
                                   std::to_string(heads.size()) + " heads");
  }
  std::copy_n(c.params.begin(), trunk.num_params(), trunk.params());
  std::copy(c.params.begin() + static_cast<ptrdiff_t>(trunk.num_params()), c.params.end(),
            heads.begin());
  out.policy = std::move(policy);
  return out;
}

}  // namespace engine
