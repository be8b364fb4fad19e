#include "engine/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/file_util.h"
#include "common/log.h"
#include "common/time_util.h"
#include "engine/checkpoint.h"
#include "engine/data/loader.h"
#include "engine/dist/grad_buckets.h"
#include "engine/model/mlp_policy.h"
#include "engine/optim/adamw.h"
#include "engine/sim/reach_task.h"

namespace engine {
namespace {

// The configuration stored in every checkpoint: the engine options as the JobSpec writes them,
// plus the model shape they imply.
nlohmann::json ModelJson(const MlpConfig& model) {
  return {{"kind", "mlp"},
          {"obs_dim", model.obs_dim},
          {"d_model", model.d_model},
          {"layers", model.layers},
          {"out_dim", model.out_dim}};
}

nlohmann::json CheckpointConfig(const api::EngineOptions& engine, const MlpConfig& model,
                                int world_size) {
  api::JobSpec spec;
  spec.engine = engine;
  nlohmann::json j;
  j["engine"] = api::ToJson(spec)["engine"];
  j["model"] = ModelJson(model);
  j["world_size"] = world_size;
  return j;
}

// One rank's batch for the MLP: its slice of the step's samples, materialised in the loader.
struct MlpBatch {
  int rows = 0;
  std::vector<float> obs;     // (rows, obs_dim)
  std::vector<float> chunks;  // (rows, H * action_dim)
};

// Rank 0 reads the checkpoint and broadcasts it (other nodes may not see rank 0's disk); every
// rank then decodes the same bytes, so every rank returns the same result, errors included.
common::Result<CheckpointData> ReadCheckpointOnAllRanks(const std::string& path,
                                                        Communicator& comm) {
  std::string msg;
  if (comm.rank() == 0) {
    auto bytes = common::ReadFile(path);
    if (bytes.ok()) {
      msg.reserve(bytes->size() + 1);
      msg = "K";
      msg += *bytes;
    } else {
      msg = "E" + bytes.status().message();
    }
  }
  comm.BroadcastBytes(&msg, 0);
  if (msg.empty() || msg[0] != 'K') {
    return common::NotFound("resume_from " + path + ": " + (msg.empty() ? "" : msg.substr(1)));
  }
  msg.erase(0, 1);
  auto d = DecodeCheckpoint(msg);
  if (!d.ok()) return common::InvalidArgument("resume_from " + path + ": " + d.status().message());
  return d;
}

common::Status CheckResumable(const CheckpointData& ck, const MlpConfig& mc, size_t n,
                              const api::EngineOptions& e, const std::string& path) {
  if (!ck.has_data_position) {
    return common::InvalidArgument(path + " is a version 1 checkpoint without a data position; " +
                                   "it cannot be resumed exactly");
  }
  if (!ck.config.contains("model") || ck.config["model"] != ModelJson(mc) ||
      ck.params.size() != n) {
    return common::InvalidArgument(path + " holds a different model (" +
                                   ck.config.value("model", nlohmann::json()).dump() +
                                   ") than the job's (" + ModelJson(mc).dump() + ")");
  }
  if (ck.data.seed != e.seed) {
    return common::InvalidArgument(path + " continues data stream seed " +
                                   std::to_string(ck.data.seed) + " but the job's seed is " +
                                   std::to_string(e.seed));
  }
  if (ck.step > e.optim.steps) {
    return common::InvalidArgument(path + " is at step " + std::to_string(ck.step) +
                                   ", past the job's " + std::to_string(e.optim.steps) + " steps");
  }
  return common::Status::Ok();
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

  const ReachTask task(e.model.action_dim, e.model.action_horizon, e.seed);
  MlpConfig mc{task.obs_dim(), e.model.d_model, e.model.layers, task.chunk_dim()};
  MlpPolicy model(mc);
  model.Init(e.seed);  // same seed on every rank: identical replicas
  AdamWConfig ac;
  ac.weight_decay = static_cast<float>(e.optim.weight_decay);
  AdamW adam(model.num_params(), ac);
  const size_t n = model.num_params();

  TrainResult result;
  uint64_t next_sample = 0;
  if (!options.resume_from.empty()) {
    auto ck = ReadCheckpointOnAllRanks(options.resume_from, comm);
    if (!ck.ok()) return ck.status();
    EMBODY_RETURN_IF_ERROR(CheckResumable(*ck, mc, n, e, options.resume_from));
    std::copy(ck->params.begin(), ck->params.end(), model.params());
    adam.Restore(ck->adam_t, std::move(ck->adam_m), std::move(ck->adam_v));
    result.first_step = ck->step;
    next_sample = ck->data.next_sample;
    if (leader) {
      common::LogInfo("resuming",
                      {{"path", options.resume_from},
                       {"step", std::to_string(ck->step)},
                       {"next_sample", std::to_string(next_sample)},
                       {"saved_world_size", std::to_string(ck->config.value("world_size", 0))},
                       {"world_size", std::to_string(world)}});
    }
  }
  const int first_step = static_cast<int>(result.first_step);

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
          "embody-engine: %d rank(s), mlp %d -> %dx%d -> %d (%zu params), steps %d..%d of %d "
          "rows per rank\n",
          world, mc.obs_dim, mc.layers, mc.d_model, mc.out_dim, n, first_step + 1, steps, rows);
      std::fflush(stdout);
    }
  }

  // One sample is 1 observation token plus H action tokens (one per action of the chunk): the
  // token count the transformer policy will see for the same data, so tokens/s stays comparable.
  // It is also each sample's loss weight in the global token-weighted mean.
  const double tokens_per_sample = 1.0 + e.model.action_horizon;
  const int64_t global_samples = static_cast<int64_t>(rows) * world;

  data::Loader<MlpBatch>::Options lo;
  lo.plan.seed = e.seed;
  lo.plan.samples_per_step = global_samples;
  lo.plan.rank = rank;
  lo.plan.world = world;
  lo.plan.tokens_per_row = std::max(512, lo.plan.lengths.MaxTokens());
  lo.first_step = first_step;
  lo.first_sample = next_sample;
  lo.num_steps = steps - first_step;
  lo.prefetch = options.prefetch;
  // The MLP sees one observation and one chunk per sample; the plan's packing (for the
  // transformer's token rows) is not used here.
  auto fill = [&task, &mc](const data::PackedPlan& plan, MlpBatch* b) -> common::Status {
    b->rows = plan.num_samples();
    b->obs.resize(static_cast<size_t>(b->rows) * mc.obs_dim);
    b->chunks.resize(static_cast<size_t>(b->rows) * mc.out_dim);
    for (int i = 0; i < b->rows; ++i) {
      task.SampleAt(plan.SampleId(i), b->obs.data() + static_cast<size_t>(i) * mc.obs_dim,
                    b->chunks.data() + static_cast<size_t>(i) * mc.out_dim);
    }
    return common::Status::Ok();
  };
  data::Loader<MlpBatch> loader(lo, fill);
  GradBuckets buckets(comm, model.grads(), n, GradBucketOptions{options.grad_bucket_bytes});

  result.losses.reserve(steps - first_step);
  const double run_start = common::MonotonicSeconds();

  auto save_checkpoint = [&](int done) -> common::Status {
    CheckpointData d;
    d.step = done;
    d.adam_t = adam.t();
    d.config = ckpt_config;
    d.params.assign(model.params(), model.params() + n);
    d.adam_m = adam.m();
    d.adam_v = adam.v();
    d.data.seed = e.seed;
    d.data.next_sample = next_sample;
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

  for (int step = first_step; step < steps; ++step) {
    const double t0 = common::MonotonicSeconds();
    auto item = loader.Next();
    if (!item.ok()) return item.status();
    const MlpBatch& batch = *item->batch;
    const double t_data = common::MonotonicSeconds();
    model.ZeroGrad();
    const float local_loss = model.Forward(batch.obs.data(), batch.chunks.data(), batch.rows);
    buckets.Begin(batch.rows * tokens_per_sample, local_loss);
    model.Backward();  // the MLP has no per-layer callback: Finish launches every bucket
    const double t_compute = common::MonotonicSeconds();
    const GlobalStepTotals totals = buckets.Finish();
    const double loss = totals.loss;
    const double t_comm = common::MonotonicSeconds();
    next_sample = item->plan.global_end;
    loader.Recycle(std::move(item->batch));
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
    const double samples_per_s = static_cast<double>(global_samples) / step_seconds;
    const double tokens_per_s = totals.weight / step_seconds;
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

  const int ran = steps - first_step;
  const double total = common::MonotonicSeconds() - run_start;
  result.mean_step_seconds = ran > 0 ? total / ran : 0.0;
  result.samples_per_s = ran > 0 ? static_cast<double>(global_samples) * ran / total : 0.0;
  result.tokens_per_s = result.samples_per_s * tokens_per_sample;
  result.params.assign(model.params(), model.params() + n);
  result.next_sample = next_sample;
  result.data_wait_seconds = loader.data_wait_seconds();
  if (leader && options.print_progress) {
    if (ran > 0) {
      std::printf(
          "done: %d steps in %.3f s (%.3f ms/step incl. checkpoints), loss %.4f -> %.4f, "
          "tokens/s %.3g, samples/s %.3g, data wait %.3f s\n",
          ran, total, result.mean_step_seconds * 1e3, result.losses.front(), result.losses.back(),
          result.tokens_per_s, result.samples_per_s, result.data_wait_seconds);
    } else {
      std::printf("done: the checkpoint is already at step %d of %d\n", first_step, steps);
    }
    std::fflush(stdout);
  }
  return result;
}

}  // namespace engine
