#include "engine/eval/eval_policy.h"

#include <algorithm>
#include <cstring>

#include "engine/format/checkpoint.h"
#include "engine/format/fp8_checkpoint.h"
#include "engine/model/policy_options.h"
#include "engine/policy/ptq.h"
#include "engine/policy/rl_checkpoint.h"

namespace engine::eval {
namespace {

constexpr char kFp8Magic[8] = {'E', 'M', 'B', 'D', 'F', 'P', '8', 'W'};

common::Result<EvalPolicy> FromFp8Bytes(const std::string& bytes, int64_t* step) {
  EMBODY_ASSIGN_OR_RETURN(data, DecodeFp8Checkpoint(bytes));
  EvalPolicy p;
  p.kind = "bc";
  p.fp8 = true;
  p.step = data.step;
  EMBODY_ASSIGN_OR_RETURN(model, PolicyFromFp8Checkpoint(data, &p.engine));
  p.flow = std::move(model);
  if (step != nullptr) p.step = *step;
  return p;
}

}  // namespace

common::Result<EvalPolicy> LoadEvalPolicy(const std::string& bytes, bool fp8) {
  if (bytes.size() >= sizeof(kFp8Magic) && std::memcmp(bytes.data(), kFp8Magic, 8) == 0) {
    EMBODY_ASSIGN_OR_RETURN(p, FromFp8Bytes(bytes, nullptr));
    p.actor = std::make_unique<FlowPolicyActor>(*p.flow, p.engine.model.inference_steps);
    return p;
  }
  EMBODY_ASSIGN_OR_RETURN(ck, DecodeCheckpoint(bytes));
  if (IsRlPolicyCheckpoint(ck)) {
    if (fp8) {
      return common::InvalidArgument(
          "FP8 evaluation applies to behaviour-cloning checkpoints; this is an rl policy",
          "eval.fp8");
    }
    EMBODY_ASSIGN_OR_RETURN(loaded, LoadRlPolicy(ck));
    EvalPolicy p;
    p.kind = "rl";
    p.step = ck.step;
    p.engine = loaded.engine;
    p.rl = std::move(loaded.policy);
    p.actor = std::make_unique<GaussianMeanActor>(*p.rl);
    return p;
  }
  EMBODY_ASSIGN_OR_RETURN(engine, EngineOptionsFromCheckpointConfig(ck.config));
  EMBODY_ASSIGN_OR_RETURN(config, PolicyConfigFromOptions(engine));
  EMBODY_ASSIGN_OR_RETURN(model, PolicyTransformer::Create(config));
  if (ck.params.size() != model->num_params()) {
    return common::InvalidArgument("the checkpoint holds " + std::to_string(ck.params.size()) +
                                   " parameters; the model it names has " +
                                   std::to_string(model->num_params()));
  }
  std::copy(ck.params.begin(), ck.params.end(), model->params());
  if (fp8) {
    EMBODY_ASSIGN_OR_RETURN(
        q, QuantizeToFp8Checkpoint(*model, ck.step, ck.config, PtqOptions{}, nullptr));
    int64_t step = ck.step;
    EMBODY_ASSIGN_OR_RETURN(p, FromFp8Bytes(EncodeFp8Checkpoint(q), &step));
    p.actor = std::make_unique<FlowPolicyActor>(*p.flow, p.engine.model.inference_steps);
    return p;
  }
  EvalPolicy p;
  p.kind = "bc";
  p.step = ck.step;
  p.engine = engine;
  p.flow = std::move(model);
  p.actor = std::make_unique<FlowPolicyActor>(*p.flow, engine.model.inference_steps);
  return p;
}

sim::EnvSpec EnvFor(const api::EngineOptions& engine, bool rl_policy, const std::string& task) {
  int vocab = PolicyConfig{}.vocab;
  if (auto config = PolicyConfigFromOptions(engine); config.ok()) vocab = config->vocab;
  sim::EnvSpec s;
  if (rl_policy) {
    s = sim::RlEnvSpec(engine.rl, engine.model.action_dim, vocab);
  } else {
    s.action_dim = engine.model.action_dim;
    s.vocab = vocab;
    s.cameras = 1;
    s.episode_steps = task == "reach" ? 50 : 0;  // push, pick_place: the task's own limit
    s.success_radius = 0.05;
    // The table tasks' demonstrations carry the object state (engine/sim/render.h:
    // ObjectState); reach's (sim:reach) carry proprioception only.
    s.privileged_state = task != "reach";
  }
  s.task = task;  // the task asked, whatever the policy trained on
  return s;
}

sim::EnvSpec EnvFor(const EvalPolicy& policy, const std::string& task) {
  return EnvFor(policy.engine, policy.kind == "rl", task);
}

}  // namespace engine::eval
