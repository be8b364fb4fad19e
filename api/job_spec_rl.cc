// engine.rl: the PPO settings of kind rl, its environment latency model and its asynchronous
// levels (disaggregated learner, batched environments, streaming).
#include <cstdint>
#include <string>

#include "api/job_spec_internal.h"

namespace api::job_spec_internal {

namespace {

// engine.rl's latency model and asynchronous levels: each level is on when its object is there.
Status ParseRlAsync(const ObjectReader& o, RlOptions* r) {
  if (o.Has("env_latency")) {
    ObjectReader l(o.At("env_latency"), "engine.rl.env_latency");
    RlLatencyOptions& m = r->env_latency;
    EMBODY_RETURN_IF_ERROR(l.CheckObject());
    EMBODY_RETURN_IF_ERROR(
        l.CheckKeys({"mean_ms", "jitter", "tail_probability", "tail_alpha", "tail_scale", "busy"}));
    // The bounds of engine/sim/step_latency.h, so the model accepts whatever passes here.
    EMBODY_RETURN_IF_ERROR(l.GetDouble("mean_ms", 0.0, 60000.0, &m.mean_ms));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("jitter", 0.0, 10.0, &m.jitter));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("tail_probability", 0.0, 0.999, &m.tail_probability));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("tail_alpha", 1.001, 100.0, &m.tail_alpha));
    EMBODY_RETURN_IF_ERROR(l.GetDouble("tail_scale", 1.0, 1000.0, &m.tail_scale));
    EMBODY_RETURN_IF_ERROR(l.GetBool("busy", &m.busy));
  }
  if (o.Has("disaggregated")) {
    ObjectReader d(o.At("disaggregated"), "engine.rl.disaggregated");
    EMBODY_RETURN_IF_ERROR(d.CheckObject());
    EMBODY_RETURN_IF_ERROR(
        d.CheckKeys({"max_staleness", "proximal", "stale_lr_scale", "rollout_ranks"}));
    r->disaggregated = true;
    EMBODY_RETURN_IF_ERROR(d.GetInt("max_staleness", 0, 64, &r->max_staleness));
    EMBODY_RETURN_IF_ERROR(d.GetInt("rollout_ranks", 0, 1 << 20, &r->rollout_ranks));
    EMBODY_RETURN_IF_ERROR(d.GetString("proximal", {"behaviour", "current"}, &r->proximal));
    EMBODY_RETURN_IF_ERROR(d.GetDouble("stale_lr_scale", 0.01, 1.0, &r->stale_lr_scale));
  }
  if (o.Has("env_async")) {
    ObjectReader a(o.At("env_async"), "engine.rl.env_async");
    EMBODY_RETURN_IF_ERROR(a.CheckObject());
    EMBODY_RETURN_IF_ERROR(a.CheckKeys({"max_batch", "max_wait_ms"}));
    r->env_async = true;
    EMBODY_RETURN_IF_ERROR(a.GetInt("max_batch", 0, r->envs, &r->max_batch));
    EMBODY_RETURN_IF_ERROR(a.GetDouble("max_wait_ms", 0.0, 10000.0, &r->max_wait_ms));
  }
  if (o.Has("streaming")) {
    ObjectReader m(o.At("streaming"), "engine.rl.streaming");
    EMBODY_RETURN_IF_ERROR(m.CheckObject());
    EMBODY_RETURN_IF_ERROR(m.CheckKeys({"micro_batches"}));
    r->streaming = true;
    EMBODY_RETURN_IF_ERROR(m.GetInt("micro_batches", 1, r->envs, &r->micro_batches));
    // Streaming overlaps the learner with acting, which only a disaggregated learner does.
    if (!r->disaggregated) {
      return InvalidArgument("needs engine.rl.disaggregated", "engine.rl.streaming");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ParseRl(const json& j, RlOptions* r) {
  ObjectReader o(j, "engine.rl");
  EMBODY_RETURN_IF_ERROR(o.CheckObject());
  EMBODY_RETURN_IF_ERROR(o.CheckKeys(
      {"task", "envs", "rollout_steps", "total_env_steps", "episode_steps", "success_radius",
       "cameras", "gamma", "gae_lambda", "clip", "value_clip", "value_coef", "entropy_coef",
       "epochs", "minibatches", "lr", "max_grad_norm", "init_log_std", "importance_cap",
       "env_latency", "disaggregated", "env_async", "streaming"}));
  EMBODY_RETURN_IF_ERROR(o.GetString("task", {"reach", "push", "pick_place"}, &r->task));
  EMBODY_RETURN_IF_ERROR(o.GetInt("envs", 1, 4096, &r->envs));
  EMBODY_RETURN_IF_ERROR(o.GetInt("rollout_steps", 1, 4096, &r->rollout_steps));
  EMBODY_RETURN_IF_ERROR(
      o.GetInt64("total_env_steps", 1, 1'000'000'000'000LL, &r->total_env_steps));
  EMBODY_RETURN_IF_ERROR(o.GetInt("episode_steps", 1, 100000, &r->episode_steps));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("success_radius", 1e-3, 1.0, &r->success_radius));
  EMBODY_RETURN_IF_ERROR(o.GetInt("cameras", 0, 3, &r->cameras));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("gamma", 0.0, 1.0, &r->gamma));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("gae_lambda", 0.0, 1.0, &r->gae_lambda));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("clip", 1e-3, 1.0, &r->clip));
  EMBODY_RETURN_IF_ERROR(o.GetBool("value_clip", &r->value_clip));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("value_coef", 0.0, 100.0, &r->value_coef));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("entropy_coef", 0.0, 1.0, &r->entropy_coef));
  EMBODY_RETURN_IF_ERROR(o.GetInt("epochs", 1, 100, &r->epochs));
  EMBODY_RETURN_IF_ERROR(o.GetInt("minibatches", 1, 4096, &r->minibatches));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("lr", 1e-7, 1.0, &r->lr));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("max_grad_norm", 0.0, 1e6, &r->max_grad_norm));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("init_log_std", -5.0, 2.0, &r->init_log_std));
  EMBODY_RETURN_IF_ERROR(o.GetDouble("importance_cap", 1.0, 100.0, &r->importance_cap));
  // Every minibatch must hold at least one step of this rank's rollout.
  if (static_cast<int64_t>(r->minibatches) > static_cast<int64_t>(r->envs) * r->rollout_steps) {
    return InvalidArgument("must not exceed envs × rollout_steps (" +
                               std::to_string(static_cast<int64_t>(r->envs) * r->rollout_steps) +
                               ")",
                           "engine.rl.minibatches");
  }
  return ParseRlAsync(o, r);
}

}  // namespace api::job_spec_internal
