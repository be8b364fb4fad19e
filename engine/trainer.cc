#include "engine/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/file_util.h"
#include "common/log.h"
#include "common/time_util.h"
#include "engine/checkpoint.h"
#include "engine/model/mlp_policy.h"
#include "engine/optim/adamw.h"
#include "engine/sim/reach_task.h"

namespace engine {
namespace {

// The configuration stored in every checkpoint: the engine options as the JobSpec writes them,
// plus the model shape they imply.
nlohmann::json CheckpointConfig(const api::EngineOptions& engine, const MlpConfig& model,
                                int world_size) {
  api::JobSpec spec;
  spec.engine = engine;
  nlohmann::json j;
  j["engine"] = api::ToJson(spec)["engine"];
  j["model"] = {{"kind", "mlp"},
                {"obs_dim", model.obs_dim},
                {"d_model", model.d_model},
                {"layers", model.layers},
                {"out_dim", model.out_dim}};
  j["world_size"] = world_size;
  return j;
}

}  // namespace

common::Result<TrainResult> Train(const TrainerOptions& options, Communicator& comm,
                                  EventSink* events) {
  const api::EngineOptions& e = options.engine;
  if (e.data.dataset != "sim:reach") {
    return common::InvalidArgument("unknown dataset " + e.data.dataset, "engine.data.dataset");
  }
  const int rank = comm.rank(), world = comm.world_size();
  const bool leader = rank == 0;
  if (!leader) events = nullptr;
  const int steps = e.optim.steps;
  const int rows = e.data.rows_per_step;
  const int log_every = options.log_every > 0 ? options.log_every : std::max(1, steps / 20);

  ReachTask task(e.model.action_dim, e.model.action_horizon, e.seed);
  MlpConfig mc{task.obs_dim(), e.model.d_model, e.model.layers, task.chunk_dim()};
  MlpPolicy model(mc);
  model.Init(e.seed);  // same seed on every rank: identical replicas
  AdamWConfig ac;
  ac.weight_decay = static_cast<float>(e.optim.weight_decay);
  AdamW adam(model.num_params(), ac);
  const size_t n = model.num_params();

  std::string ckpt_dir;
  if (leader && !options.checkpoint_dir.empty()) {
    EMBODY_RETURN_IF_ERROR(common::MakeDirs(options.checkpoint_dir));
    ckpt_dir = std::filesystem::absolute(options.checkpoint_dir).lexically_normal().string();
  }
  const nlohmann::json ckpt_config = CheckpointConfig(e, mc, world);
  if (options.print_progress) {
    // Every rank says it is up, so each rank's log shows it took part.
    std::printf("embody-engine: rank %d of %d ready\n", rank, world);
    std::fflush(stdout);
  }

  if (leader) {
    common::LogInfo("training", {{"world_size", std::to_string(world)},
                                 {"params", std::to_string(n)},
                                 {"obs_dim", std::to_string(mc.obs_dim)},
                                 {"out_dim", std::to_string(mc.out_dim)},
                                 {"config", ckpt_config["engine"].dump()}});
    if (options.print_progress) {
      std::printf(
          "embody-engine: %d rank(s), mlp %d -> %dx%d -> %d (%zu params), %d steps of %d "
          "rows per rank\n",
          world, mc.obs_dim, mc.layers, mc.d_model, mc.out_dim, n, steps, rows);
      std::fflush(stdout);
    }
  }

  // One sample is 1 observation token plus H action tokens (one per action of the chunk): the
  // token count the transformer policy will see for the same data, so tokens/s stays comparable.
  const double tokens_per_sample = 1.0 + e.model.action_horizon;
  const double global_samples = static_cast<double>(rows) * world;

  std::vector<float> obs(static_cast<size_t>(rows) * mc.obs_dim);     // (rows, obs_dim)
  std::vector<float> chunks(static_cast<size_t>(rows) * mc.out_dim);  // (rows, H * action_dim)
  TrainResult result;
  result.losses.reserve(steps);
  const double run_start = common::MonotonicSeconds();

  auto save_checkpoint = [&](int done) -> common::Status {
    CheckpointData d;
    d.step = done;
    d.adam_t = adam.t();
    d.config = ckpt_config;
    d.params.assign(model.params(), model.params() + n);
    d.adam_m = adam.m();
    d.adam_v = adam.v();
    const std::string path = CheckpointPath(ckpt_dir, done);
    auto bytes = SaveCheckpoint(path, d);
    if (!bytes.ok()) return bytes.status();
    EMBODY_RETURN_IF_ERROR(PruneCheckpoints(ckpt_dir, e.checkpoint.keep));
    result.last_checkpoint = path;
    common::LogInfo(
        "checkpoint written",
        {{"step", std::to_string(done)}, {"path", path}, {"bytes", std::to_string(*bytes)}});
    if (events != nullptr) {
      events->Post({{"type", "checkpoint"}, {"step", done}, {"path", path}, {"bytes", *bytes}});
    }
    return common::Status::Ok();
  };

  for (int step = 0; step < steps; ++step) {
    const double t0 = common::MonotonicSeconds();
    task.Sample(static_cast<uint64_t>(rank), static_cast<uint64_t>(step), rows, obs.data(),
                chunks.data());
    const double t_data = common::MonotonicSeconds();
    model.ZeroGrad();
    const float local_loss = model.Forward(obs.data(), chunks.data(), rows);
    model.Backward();
    const double t_compute = common::MonotonicSeconds();
    comm.AllreduceMean(model.grads(), n);
    const double loss = comm.AllreduceSum(local_loss) / world;
    const double t_comm = common::MonotonicSeconds();
    if (!std::isfinite(loss)) {
      return common::Internal("loss is not finite at step " + std::to_string(step + 1) +
                              " (diverged; lower engine.optim.lr)");
    }
    double sq = 0.0;
    for (size_t i = 0; i < n; ++i) sq += static_cast<double>(model.grads()[i]) * model.grads()[i];
    const double grad_norm = std::sqrt(sq);
    const double lr = LearningRate(step, e.optim.lr, e.optim.warmup_steps, steps);
    adam.Step(model.params(), model.grads(), static_cast<float>(lr));
    const double t1 = common::MonotonicSeconds();

    const int done = step + 1;
    const double step_seconds = t1 - t0;
    const double samples_per_s = global_samples / step_seconds;
    const double tokens_per_s = samples_per_s * tokens_per_sample;
    result.losses.push_back(static_cast<float>(loss));
    if (events != nullptr) {
      events->Post({{"type", "step"},
                    {"step", done},
                    {"steps", steps},
                    {"loss", loss},
                    {"tokens_per_s", tokens_per_s},
                    {"samples_per_s", samples_per_s},
                    {"step_seconds", step_seconds},
                    {"lr", lr},
                    {"grad_norm", grad_norm},
                    {"data_seconds", t_data - t0},
                    {"compute_seconds", t_compute - t_data},
                    {"allreduce_seconds", t_comm - t_compute},
                    {"world_size", world}});
    }
    if (leader && options.print_progress && (done % log_every == 0 || done == steps)) {
      std::printf(
          "step %d/%d loss %.4f lr %.2e grad_norm %.3f step %.2f ms tokens/s %.3g "
          "samples/s %.3g\n",
          done, steps, loss, lr, grad_norm, step_seconds * 1e3, tokens_per_s, samples_per_s);
      std::fflush(stdout);
    }
    const bool periodic = e.checkpoint.every_steps > 0 && done % e.checkpoint.every_steps == 0;
    if (!ckpt_dir.empty() && (periodic || done == steps)) {
      EMBODY_RETURN_IF_ERROR(save_checkpoint(done));
    }
  }

  const double total = common::MonotonicSeconds() - run_start;
  result.mean_step_seconds = total / steps;
  result.samples_per_s = global_samples * steps / total;
  result.tokens_per_s = result.samples_per_s * tokens_per_sample;
  result.params.assign(model.params(), model.params() + n);
  if (leader && options.print_progress) {
    std::printf(
        "done: %d steps in %.3f s (%.3f ms/step incl. checkpoints), loss %.4f -> %.4f, "
        "tokens/s %.3g, samples/s %.3g\n",
        steps, total, result.mean_step_seconds * 1e3, result.losses.front(), result.losses.back(),
        result.tokens_per_s, result.samples_per_s);
    std::fflush(stdout);
  }
  return result;
}

}  // namespace engine
