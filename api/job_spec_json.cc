// ToJson(JobSpec): the complete spec, every default filled in, in the form ParseJobSpec reads back;
// optional blocks are written only when set so that stored specs read back unchanged.
#include <nlohmann/json.hpp>

#include "api/dataset_ref.h"
#include "api/job_spec.h"

namespace api {

using nlohmann::json;

namespace {

json DataJson(const DataOptions& d) {
  json j = {{"dataset", d.dataset},
            {"rows_per_step", d.rows_per_step},
            {"packing", d.packing},
            {"tokens_per_row", d.tokens_per_row}};
  // Written only when set, so specs (and checkpoints) of the default stream read as before.
  if (d.demo_noise != kDefaultDemoNoise) j["demo_noise"] = d.demo_noise;
  // The dataset options exist only for a dataset directory or a stored dataset (launched as its
  // directory); ParseData refuses them with the built-in stream.
  if (!IsBuiltinDataset(d.dataset)) {
    j["cameras"] = d.cameras;
    j["proprio"] = d.proprio;
    j["image_size"] = d.image_size;
    j["language"] = d.language;
  }
  return j;
}

}  // namespace

json ToJson(const JobSpec& s) {
  json j;
  j["name"] = s.name;
  j["kind"] = JobKindName(s.kind);
  j["resources"] = {{"nodes", s.resources.nodes},
                    {"ranks_per_node", s.resources.ranks_per_node},
                    {"slot_type", s.resources.slot_type},
                    {"slots_per_rank", s.resources.slots_per_rank},
                    {"memory_per_rank_bytes", s.resources.memory_per_rank_bytes}};
  j["priority"] = s.priority;
  j["max_restarts"] = s.max_restarts;
  j["time_limit_seconds"] = s.time_limit_seconds;
  if (s.init_from != 0) j["init_from"] = s.init_from;
  if (s.kind == JobKind::kEval) {
    const EvalOptions& ev = s.eval;
    j["eval"] = {{"tasks", ev.tasks}, {"episodes", ev.episodes}, {"seed", ev.seed},
                 {"fp8", ev.fp8}};
    if (ev.checkpoint_from_job != 0) j["eval"]["checkpoint_from_job"] = ev.checkpoint_from_job;
    if (ev.checkpoint != 0) j["eval"]["checkpoint"] = ev.checkpoint;
  } else if (s.kind == JobKind::kImport) {
    j["import"] = {{"dataset_id", s.import_dataset_id}, {"source", ToJson(s.import_source)}};
  } else if (s.kind == JobKind::kCommand) {
    j["command"] = s.command;
    // Only when given, so specs stored before these existed read back the same.
    if (!s.datasets.empty()) j["datasets"] = s.datasets;
    if (s.launcher != "mpirun") j["launcher"] = s.launcher;
    if (!s.python_env.empty()) j["environment"] = {{"python", s.python_env}};
    if (!s.image.empty()) j["environment"] = {{"image", s.image}};
  } else {
    const EngineOptions& e = s.engine;
    j["engine"] = {
        {"model",
         {{"d_model", e.model.d_model},
          {"layers", e.model.layers},
          {"heads", e.model.heads},
          {"mlp", e.model.mlp},
          {"action_horizon", e.model.action_horizon},
          {"action_dim", e.model.action_dim},
          {"action_head", e.model.action_head},
          {"inference_steps", e.model.inference_steps}}},
        {"data", DataJson(e.data)},
        {"attention", e.attention},
        {"optim",
         {{"lr", e.optim.lr},
          {"steps", e.optim.steps},
          {"warmup_steps", e.optim.warmup_steps},
          {"weight_decay", e.optim.weight_decay}}},
        {"checkpoint", {{"every_steps", e.checkpoint.every_steps}, {"keep", e.checkpoint.keep}}},
        {"seed", e.seed}};
    if (s.kind == JobKind::kRl) {
      const RlOptions& r = e.rl;
      j["engine"].erase("data");
      j["engine"].erase("optim");
      j["engine"].erase("checkpoint");
      j["engine"]["rl"] = {{"task", r.task},
                           {"envs", r.envs},
                           {"rollout_steps", r.rollout_steps},
                           {"total_env_steps", r.total_env_steps},
                           {"episode_steps", r.episode_steps},
                           {"success_radius", r.success_radius},
                           {"cameras", r.cameras},
                           {"gamma", r.gamma},
                           {"gae_lambda", r.gae_lambda},
                           {"clip", r.clip},
                           {"value_clip", r.value_clip},
                           {"value_coef", r.value_coef},
                           {"entropy_coef", r.entropy_coef},
                           {"epochs", r.epochs},
                           {"minibatches", r.minibatches},
                           {"lr", r.lr},
                           {"max_grad_norm", r.max_grad_norm},
                           {"init_log_std", r.init_log_std},
                           {"importance_cap", r.importance_cap}};
      json& rl = j["engine"]["rl"];
      const RlLatencyOptions& l = r.env_latency;
      if (l.mean_ms > 0.0) {
        rl["env_latency"] = {{"mean_ms", l.mean_ms},
                             {"jitter", l.jitter},
                             {"tail_probability", l.tail_probability},
                             {"tail_alpha", l.tail_alpha},
                             {"tail_scale", l.tail_scale},
                             {"busy", l.busy}};
      }
      if (r.disaggregated) {
        rl["disaggregated"] = {{"max_staleness", r.max_staleness},
                               {"proximal", r.proximal},
                               {"stale_lr_scale", r.stale_lr_scale}};
        if (r.rollout_ranks > 0) rl["disaggregated"]["rollout_ranks"] = r.rollout_ranks;
      }
      if (r.env_async) {
        rl["env_async"] = {{"max_batch", r.max_batch}, {"max_wait_ms", r.max_wait_ms}};
      }
      if (r.streaming) rl["streaming"] = {{"micro_batches", r.micro_batches}};
    }
    if (e.fp8.inference) {
      j["engine"]["fp8"] = {{"inference", true}, {"format", e.fp8.format}};
    }
    if (e.fp8.allreduce) j["engine"]["fp8"]["allreduce"] = true;
    if (e.fp8.compute) {
      j["engine"]["fp8"]["compute"] = true;
      j["engine"]["fp8"]["scaling"] = e.fp8.scaling;
      if (e.fp8.scaling == "delayed") j["engine"]["fp8"]["amax_history"] = e.fp8.amax_history;
    }
    if (!e.checkpoint.best_metric.empty()) {
      j["engine"]["checkpoint"]["best"] = {{"metric", e.checkpoint.best_metric},
                                           {"mode", e.checkpoint.best_mode}};
    }
    // Only when not the default, so specs stored before the option existed read back the same.
    if (e.precision != "fp32") j["engine"]["precision"] = e.precision;
    if (e.eval_every != 0) {
      j["engine"]["eval_every"] = e.eval_every;
      j["engine"]["eval_episodes"] = e.eval_episodes;
    }
  }
  return j;
}

}  // namespace api
