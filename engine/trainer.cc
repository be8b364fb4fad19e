#include "engine/trainer.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "api/dataset_ref.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/time_util.h"
#include "engine/checkpoint.h"
#include "engine/data/loader.h"
#include "engine/dataset_source.h"
#include "engine/dist/grad_buckets.h"
#include "engine/eval/periodic_eval.h"
#include "engine/model/linear_fast.h"
#include "engine/checkpoint_model.h"
#include "engine/model/policy_options.h"
#include "engine/optim/adamw.h"
#include "engine/precision.h"
#include "engine/sim/reach_task.h"
#include "engine/train_batches.h"

namespace engine {
namespace {

nlohmann::json CheckpointConfig(const api::EngineOptions& engine, const nlohmann::json& model,
                                int world_size) {
  api::JobSpec spec;
  spec.engine = engine;
  nlohmann::json j;
  j["engine"] = api::ToJson(spec)["engine"];
  j["model"] = model;
  j["world_size"] = world_size;
  return j;
}

// Eigen's GEMMs allocate their packing buffers (hundreds of KiB) on every product; above glibc's
// default mmap threshold (128 KiB, adaptive) each would be a fresh mmap whose pages fault in again
// on every call, and freed heap tops would be returned to the kernel and faulted back. Keeping
// such blocks in the heap makes steady-state steps fault-free. Process-wide and idempotent.
void KeepLargeBlocksInHeap() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

// Rank 0 reads the checkpoint and broadcasts it (other nodes may not see rank 0's disk); every
// rank then decodes the same bytes, so every rank returns the same result, errors included.
common::Result<CheckpointData> ReadCheckpointOnAllRanks(const std::string& path, bool newest,
                                                        Communicator& comm) {
  std::string msg;
  if (comm.rank() == 0) {
    const std::string chosen = newest ? NewestCheckpointFrom(path) : path;
    if (chosen != path) {
      common::LogInfo("a newer checkpoint of this run exists; resuming from it",
                      {{"asked", path}, {"resuming_from", chosen}});
    }
    auto bytes = common::ReadFile(chosen);
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

// Every rank learns whether any rank failed; a rank that did returns its own error, the others
// say which rank to look at. So a failure that only some ranks see (a corrupt chunk only one
// rank reads) ends the run on all of them at the same point instead of leaving the rest blocked
// in the next collective.
common::Status AgreeOnFailure(const common::Status& mine, Communicator& comm,
                              const std::string& what) {
  const double failed_rank = mine.ok() ? -1.0 : static_cast<double>(comm.rank());
  const double first = comm.AllreduceMax(failed_rank);
  if (!mine.ok()) return mine;
  if (first < 0) return common::Status::Ok();
  return common::FailedPrecondition("stopped: rank " + std::to_string(static_cast<int>(first)) +
                                    " failed " + what + " (its log says why)");
}

common::Status CheckResumable(const CheckpointData& ck, const nlohmann::json& model_json, size_t n,
                              const api::EngineOptions& e, const std::string& path,
                              const DatasetSource* source) {
  if (!ck.has_data_position) {
    return common::InvalidArgument(path + " is a version 1 checkpoint without a data position; " +
                                   "it cannot be resumed exactly");
  }
  if (!ck.config.contains("model") || ck.config["model"] != model_json || ck.params.size() != n) {
    return common::InvalidArgument(path + " holds a different model (" +
                                   ck.config.value("model", nlohmann::json()).dump() +
                                   ") than the job's (" + model_json.dump() + ")");
  }
  if (ck.data.seed != e.seed) {
    return common::InvalidArgument(path + " continues data stream seed " +
                                   std::to_string(ck.data.seed) + " but the job's seed is " +
                                   std::to_string(e.seed));
  }
  const uint64_t samples = source != nullptr ? source->dataset().samples() : 0;
  const uint64_t fingerprint = source != nullptr ? source->fingerprint() : 0;
  if (ck.data.dataset_samples != samples || ck.data.dataset_fingerprint != fingerprint) {
    auto describe = [](uint64_t n, uint64_t f) {
      return n == 0 ? std::string("the built-in stream")
                    : "a dataset of " + std::to_string(n) + " samples (fingerprint " +
                          std::to_string(f) + ")";
    };
    return common::InvalidArgument(path + " continues " +
                                   describe(ck.data.dataset_samples, ck.data.dataset_fingerprint) +
                                   " but the job trains on " + describe(samples, fingerprint));
  }
  if (ck.step > e.optim.steps) {
    return common::InvalidArgument(path + " is at step " + std::to_string(ck.step) +
                                   ", past the job's " + std::to_string(e.optim.steps) + " steps");
  }
  return common::Status::Ok();
}

}  // namespace
common::Result<TrainResult> Train(const TrainerOptions& options, Communicator& comm,
                                  EventSink* events, bool* failed_on_every_rank) {
  bool ignored = false;
  if (failed_on_every_rank == nullptr) failed_on_every_rank = &ignored;
  *failed_on_every_rank = true;  // until the loop: every check before it is made on every rank
  const api::EngineOptions& e = options.engine;
  EMBODY_ASSIGN_OR_RETURN(dataset_ref, api::ParseDatasetRef(e.data.dataset));
  if (dataset_ref.is_stored()) {
    // The server resolves a stored dataset at submit and launches the job with its directory;
    // a spec that still names one was not launched by the server.
    return common::InvalidArgument("\"" + e.data.dataset +
                                       "\" is resolved by embody-server; the engine opens "
                                       "\"sim:reach\" or \"dir:/path\"",
                                   "engine.data.dataset");
  }
  KeepLargeBlocksInHeap();
  const int rank = comm.rank(), world = comm.world_size();
  const bool leader = rank == 0;
  if (!leader) events = nullptr;
  int steps = e.optim.steps;  // lowered to the last step run when stopped early
  const int log_every = options.log_every > 0 ? options.log_every : std::max(1, steps / 20);

  auto config = PolicyConfigFromOptions(e);
  if (!config.ok()) return config.status();
  auto created = PolicyTransformer::Create(*config);
  if (!created.ok()) return created.status();
  PolicyTransformer& model = **created;
  model.Init(e.seed);  // same seed on every rank: identical replicas
  if (e.fp8.compute) EMBODY_RETURN_IF_ERROR(model.EnableFp8Compute(Fp8ComputeOptionsFrom(e.fp8)));
  const size_t n = model.num_params();
  const nlohmann::json model_json = ModelJson(*config, n);
  EMBODY_ASSIGN_OR_RETURN(periodic_eval, eval::PeriodicEval::ForTraining(e));
  EMBODY_ASSIGN_OR_RETURN(demos, MakeDemoSource(e.data.dataset, e.model.action_dim,
                                                e.model.action_horizon, e.seed, config->vocab));
  const DemoSource& task = *demos;

  // A dataset directory: every rank opens it (it must be readable where every rank runs) and
  // computes the same token counts from its indexes.
  std::unique_ptr<DatasetSource> source;
  std::shared_ptr<const data::DatasetStream> stream;
  if (dataset_ref.is_directory()) {
    auto opened = DatasetSource::Open(dataset_ref.path, e.data, *config, e.data.tokens_per_row);
    EMBODY_RETURN_IF_ERROR(
        AgreeOnFailure(opened.status(), comm, "to open dataset " + dataset_ref.path));
    source = std::move(opened).value();
    stream = std::make_shared<const data::DatasetStream>(e.seed, source->sample_tokens());
  }
  AdamWConfig ac;
  ac.weight_decay = static_cast<float>(e.optim.weight_decay);
  AdamW adam(n, ac);
  // engine.fp8.allreduce: the buckets' sums go over the wire as fp8 with error feedback.
  std::unique_ptr<Fp8Allreduce> fp8_allreduce;
  if (e.fp8.allreduce) fp8_allreduce = std::make_unique<Fp8Allreduce>(comm, n);

  TrainResult result;
  uint64_t next_sample = 0;
  if (!options.resume_from.empty()) {
    auto ck = ReadCheckpointOnAllRanks(options.resume_from, options.resume_newest, comm);
    if (!ck.ok()) return ck.status();
    EMBODY_RETURN_IF_ERROR(
        CheckResumable(*ck, model_json, n, e, options.resume_from, source.get()));
    std::copy(ck->params.begin(), ck->params.end(), model.params());
    adam.Restore(ck->adam_t, std::move(ck->adam_m), std::move(ck->adam_v));
    if (fp8_allreduce != nullptr) {
      EMBODY_RETURN_IF_ERROR(fp8_allreduce->SetResidual(
          ResidualForRank(ck->grad_residuals, ck->grad_residual_ranks, n, rank, world)));
    }
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
  const nlohmann::json ckpt_config = CheckpointConfig(e, model_json, world);
  if (options.print_progress) {
    // Every rank says it is up, so each rank's log shows it took part.
    std::printf("embody-engine: rank %d of %d ready\n", rank, world);
    std::fflush(stdout);
  }

  // engine.precision, chosen by each rank for its own CPU (ranks on different CPUs may mix bf16
  // and fp32 products; gradients meet in fp32 either way); before the GEMM rate, which is
  // measured through the chosen products. The event is rank 0's choice.
  const PrecisionChoice precision = ApplyPrecision(e.precision);
  if (events != nullptr && precision.requested != "fp32") events->Post(PrecisionEvent(precision));
  if (leader && !precision.warning.empty()) {
    common::LogWarn("precision", {{"requested", precision.requested},
                                     {"used", precision.used},
                                     {"reason", precision.warning}});
  }

  // The GEMM rate every rank measures on its own core at the same time (what the step will get),
  // summed: the denominator of mfu.
  if (options.measure_gemm_ceiling) {
    result.gemm_gflops = comm.AllreduceSum(MeasureGemmGflops());
  }

  const data::PlanConfig plan_config = PlanConfigFor(e, rank, world, stream);
  const int64_t global_samples = plan_config.samples_per_step;
  const int samples_per_rank = static_cast<int>(global_samples / world);
  if (leader) {
    common::LogInfo("training", {{"world_size", std::to_string(world)},
                                 {"params", std::to_string(model.layout().num_parameters())},
                                 {"samples_per_rank", std::to_string(samples_per_rank)},
                                 {"gemm_gflops", std::to_string(result.gemm_gflops)},
                                 {"config", ckpt_config["engine"].dump()}});
    if (source != nullptr) {
      std::string cams, props;
      for (const auto& k : source->camera_keys()) cams += (cams.empty() ? "" : ",") + k;
      for (const auto& k : source->proprio_keys()) props += (props.empty() ? "" : ",") + k;
      common::LogInfo(
          "dataset", {{"path", dataset_ref.path},
                      {"episodes", std::to_string(source->dataset().episodes())},
                      {"samples", std::to_string(stream->samples())},
                      {"mean_sample_tokens", std::to_string(stream->MeanTokens())},
                      {"cameras", cams},
                      {"proprio", props},
                      {"index_counts_checked", source->index_counts_checked() ? "true" : "false"}});
    }
    if (options.print_progress) {
      std::printf(
          "embody-engine: %d rank(s), policy transformer d_model %d x %d layers, %d heads, mlp "
          "%d (%zu params), %s, %s attention, %d samples per rank per step, steps %d..%d\n",
          world, config->d_model, config->layers, config->heads, config->mlp,
          model.layout().num_parameters(), e.data.packing ? "packed" : "padded",
          e.attention.c_str(), samples_per_rank, first_step + 1, steps);
      std::fflush(stdout);
    }
  }

  data::Loader<TrainBatch>::Options lo;
  lo.plan = plan_config;
  lo.first_step = first_step;
  lo.first_sample = next_sample;
  lo.num_steps = steps - first_step;
  lo.prefetch = options.prefetch;
  const PolicyConfig model_config = *config;
  const bool packing = e.data.packing;
  std::unique_ptr<DatasetSampleReader> reader;
  if (source != nullptr) {
    reader = std::make_unique<DatasetSampleReader>(
        *source, lo.plan, next_sample, lo.num_steps,
        storage::ReadAheadOptions{options.read_threads,
                                  static_cast<size_t>(2 * samples_per_rank + 1)});
  }
  auto fill = [&task, &reader, model_config, packing](const data::PackedPlan& plan,
                                                      TrainBatch* b) -> common::Status {
    if (reader != nullptr) return FillDatasetBatch(*reader, model_config, packing, plan, b);
    return FillTrainBatch(task, model_config, packing, plan, b);
  };
  // Activations for the largest batch expected up front (the model grows them if one is larger):
  // packed rows come out a little above rows_per_step; padded rows are at most the longest sample.
  if (packing) {
    model.Reserve(e.data.rows_per_step + 2, e.data.tokens_per_row);
  } else {
    model.Reserve(samples_per_rank, stream != nullptr
                                        ? stream->MaxTokens()
                                        : lo.plan.lengths.MaxTokens() + e.model.action_horizon);
  }
  data::Loader<TrainBatch> loader(lo, fill);
  GradBuckets buckets(comm, model.grads(), n,
                      GradBucketOptions{options.grad_bucket_bytes, fp8_allreduce.get()});
  BackwardHooks hooks;
  hooks.ready = buckets.ReadyCallback();
  hooks.poll = [&buckets] { buckets.Poll(); };

  result.losses.reserve(steps - first_step);
  result.real_tokens.reserve(steps - first_step);
  const double run_start = common::MonotonicSeconds();
  double run_real = 0.0, run_slots = 0.0;

  // residuals: every rank's fp8 all-reduce residual, gathered (empty without it).
  auto save_checkpoint = [&](int done, std::vector<float> residuals) -> common::Status {
    CheckpointData d;
    d.grad_residual_ranks = residuals.empty() ? 0 : static_cast<uint32_t>(world);
    d.grad_residuals = std::move(residuals);
    d.step = done;
    d.adam_t = adam.t();
    d.config = ckpt_config;
    d.params.assign(model.params(), model.params() + n);
    d.adam_m = adam.m();
    d.adam_v = adam.v();
    d.data.seed = e.seed;
    d.data.next_sample = next_sample;
    if (stream != nullptr) {
      d.data.epoch = stream->Epoch(next_sample);
      d.data.in_epoch = stream->InEpoch(next_sample);
      d.data.dataset_samples = stream->samples();
      d.data.dataset_fingerprint = source->fingerprint();
    }
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
    if (world > 1) {
      EMBODY_RETURN_IF_ERROR(AgreeOnFailure(
          item.status(), comm, "to load step " + std::to_string(step + 1) + "'s data"));
    } else if (!item.ok()) {
      return item.status();
    }
    const TrainBatch& tb = *item->batch;
    // Global real tokens, slots and useful FLOPs: one small all-reduce, started first so it
    // completes alongside the gradient buckets.
    // The fourth counts ranks asked to stop: every rank learns it in the same step.
    const bool stop_here = options.stop_requested != nullptr && options.stop_requested->load();
    double stats[4] = {static_cast<double>(tb.real_tokens), static_cast<double>(tb.slots),
                       tb.useful_flops, stop_here ? 1.0 : 0.0};
    const CollectiveId stats_id = comm.StartAllreduceSum(stats, 4);
    const double t_data = common::MonotonicSeconds();

    model.ZeroGrad();
    auto local_loss = model.Forward(tb.batch);
    if (!local_loss.ok()) {
      comm.Wait(stats_id);
      *failed_on_every_rank = false;  // a batch this rank built; the others go on
      return local_loss.status();
    }
    const double t_fwd = common::MonotonicSeconds();
    buckets.Begin(tb.batch.WeightTotal(), *local_loss);
    common::Status backward = model.Backward(&hooks);
    const double t_bwd = common::MonotonicSeconds();
    const Fp8ComputeStats fp8_compute = model.TakeFp8ComputeStats();  // this rank's, this step's
    const GlobalStepTotals totals = buckets.Finish();
    comm.Wait(stats_id);
    if (!backward.ok()) {
      *failed_on_every_rank = false;
      return backward;
    }
    const double loss = totals.loss;
    const double t_comm = common::MonotonicSeconds();
    next_sample = item->plan.global_end;
    loader.Recycle(std::move(item->batch));
    if (!std::isfinite(loss)) {
      return common::Internal("loss is not finite at step " + std::to_string(step + 1) +
                              " (diverged; lower engine.optim.lr)");
    }
    const float* g = model.grads();
    double sq = 0.0;
    for (size_t i = 0; i < n; ++i) sq += static_cast<double>(g[i]) * g[i];
    const double grad_norm = std::sqrt(sq);
    const double lr = LearningRate(step, e.optim.lr, e.optim.warmup_steps, steps);
    adam.Step(model.params(), model.grads(), static_cast<float>(lr));
    const double t1 = common::MonotonicSeconds();

    const int done = step + 1;
    const double step_seconds = t1 - t0;
    const double real = stats[0], slots = stats[1], flops = stats[2];
    run_real += real;
    run_slots += slots;
    const double tokens_per_s = real / step_seconds;
    const double samples_per_s = static_cast<double>(global_samples) / step_seconds;
    result.losses.push_back(static_cast<float>(loss));
    result.real_tokens.push_back(static_cast<int64_t>(real));
    if (events != nullptr) {
      nlohmann::json ev = {{"type", "step"},
                           {"step", done},
                           {"steps", steps},
                           {"loss", loss},
                           {"lr", lr},
                           {"grad_norm", grad_norm},
                           {"tokens_per_s", tokens_per_s},
                           {"samples_per_s", samples_per_s},
                           {"step_seconds", step_seconds},
                           {"data_wait_seconds", t_data - t0},
                           {"forward_seconds", t_fwd - t_data},
                           {"backward_seconds", t_bwd - t_fwd},
                           {"allreduce_seconds", t_comm - t_bwd},
                           {"optimizer_seconds", t1 - t_comm},
                           {"padding_ratio", slots > 0 ? 1.0 - real / slots : 0.0},
                           {"packing_efficiency", slots > 0 ? real / slots : 1.0},
                           {"world_size", world}};
      if (world > 1) {
        ev["grad_wire_bytes"] = totals.wire_bytes;
        ev["grad_wire_bytes_fp32"] = totals.wire_bytes_fp32;
      }
      if (totals.fp8.elements > 0) ev["fp8_allreduce"] = Fp8StatsJson(totals.fp8);
      if (model.fp8_compute()) {
        ev["fp8_compute_e4m3"] = Fp8StatsJson(fp8_compute.e4m3);
        ev["fp8_compute_e5m2"] = Fp8StatsJson(fp8_compute.e5m2);
      }
      if (result.gemm_gflops > 0.0) ev["mfu"] = flops / step_seconds / (result.gemm_gflops * 1e9);
      if (periodic_eval.Due(done)) {  // engine.eval_every: rank 0 alone, the others wait
        *failed_on_every_rank = false;
        EMBODY_RETURN_IF_ERROR(periodic_eval.Run(model, &ev));
        model.TakeFp8ComputeStats();  // the evaluation's products belong to no step
        *failed_on_every_rank = true;
      }
      events->Post(std::move(ev));
    }
    if (leader && options.print_progress && (done % log_every == 0 || done == steps)) {
      std::printf(
          "step %d/%d loss %.4f lr %.2e grad_norm %.3f step %.1f ms tokens/s %.4g "
          "samples/s %.3g padding %.1f%%\n",
          done, steps, loss, lr, grad_norm, step_seconds * 1e3, tokens_per_s, samples_per_s,
          slots > 0 ? 100.0 * (1.0 - real / slots) : 0.0);
      std::fflush(stdout);
    }
    const bool periodic = e.checkpoint.every_steps > 0 && done % e.checkpoint.every_steps == 0;
    const bool stopping = stats[3] > 0 && done < steps;
    if (!options.checkpoint_dir.empty() && (periodic || done == steps || stopping)) {
      // Only rank 0 writes; all ranks learn whether it could.
      std::vector<float> residuals;
      if (fp8_allreduce != nullptr && world > 1) {  // one rank exchanges nothing, owes nothing
        comm.GatherFloats(fp8_allreduce->residual().data(), n, &residuals, 0);
      }
      const common::Status saved =
          leader ? save_checkpoint(done, std::move(residuals)) : common::Status::Ok();
      EMBODY_RETURN_IF_ERROR(AgreeOnFailure(saved, comm, "to write a checkpoint"));
    }
    if (stopping) {
      result.stopped = true;
      steps = done;  // the summary below covers the steps run
      if (leader) {
        common::LogInfo("stopping early on request",
                        {{"step", std::to_string(done)}, {"checkpoint", result.last_checkpoint}});
      }
      break;
    }
  }

  const int ran = steps - first_step;
  const double total = common::MonotonicSeconds() - run_start;
  result.mean_step_seconds = ran > 0 ? total / ran : 0.0;
  result.samples_per_s = ran > 0 ? static_cast<double>(global_samples) * ran / total : 0.0;
  result.tokens_per_s = ran > 0 ? run_real / total : 0.0;
  result.padding_ratio = run_slots > 0 ? 1.0 - run_real / run_slots : 0.0;
  result.params.assign(model.params(), model.params() + n);
  result.next_sample = next_sample;
  if (stream != nullptr) {
    result.epoch = stream->Epoch(next_sample);
    result.in_epoch = stream->InEpoch(next_sample);
  }
  result.data_wait_seconds = loader.data_wait_seconds();
  if (leader && options.print_progress) {
    if (ran > 0) {
      std::printf(
          "done: %d steps in %.3f s (%.1f ms/step incl. checkpoints), loss %.4f -> %.4f, "
          "real tokens/s %.4g, samples/s %.3g, padding %.1f%%, data wait %.3f s\n",
          ran, total, result.mean_step_seconds * 1e3, result.losses.front(), result.losses.back(),
          result.tokens_per_s, result.samples_per_s, 100.0 * result.padding_ratio,
          result.data_wait_seconds);
    } else {
      std::printf("done: the checkpoint is already at step %d of %d\n", first_step, steps);
    }
    std::fflush(stdout);
  }

  *failed_on_every_rank = false;  // the evaluation (and quantisation) runs on rank 0 alone
  // engine.fp8.inference: quantise the trained policy, write its FP8 checkpoint, and evaluate
  // from the checkpoint's bytes exactly as a rollout would load them.
  std::unique_ptr<PolicyTransformer> fp8_model;
  if (leader && e.fp8.inference && !result.stopped) {
    EMBODY_ASSIGN_OR_RETURN(q, QuantizeToFp8Checkpoint(model, steps, ckpt_config, PtqOptions{},
                                                       &result.fp8_summary));
    const std::string bytes = EncodeFp8Checkpoint(q);
    if (!ckpt_dir.empty()) {
      result.fp8_checkpoint = ckpt_dir + "/policy-step-" + std::to_string(steps) + ".fp8";
      EMBODY_RETURN_IF_ERROR(common::WriteFileAtomic(result.fp8_checkpoint, bytes));
    }
    EMBODY_ASSIGN_OR_RETURN(decoded, DecodeFp8Checkpoint(bytes));
    EMBODY_ASSIGN_OR_RETURN(loaded, PolicyFromFp8Checkpoint(decoded, nullptr));
    fp8_model = std::move(loaded);
    if (options.print_progress) {
      const fp8::Fp8Stats& st = result.fp8_summary.stats;
      std::printf(
          "fp8: %s%sweights %zu -> %zu bytes (%.3fx), amax %.4g, scales %.3g..%.3g, saturated "
          "%lld, underflowed %lld\n",
          result.fp8_checkpoint.c_str(), result.fp8_checkpoint.empty() ? "" : ": ",
          result.fp8_summary.fp32_bytes, result.fp8_summary.fp8_bytes,
          static_cast<double>(result.fp8_summary.fp32_bytes) / result.fp8_summary.fp8_bytes,
          st.amax, st.scale_min, st.scale_max, static_cast<long long>(st.saturated),
          static_cast<long long>(st.underflowed));
      std::fflush(stdout);
    }
  }
  if (leader && options.eval_samples > 0 && !result.stopped && source == nullptr) {
    EvalResult ev;
    if (fp8_model != nullptr) {
      EMBODY_ASSIGN_OR_RETURN(c, CompareFp8Eval(model, *fp8_model, e, options.eval_samples));
      ev = c.fp32;
      result.fp8_evaluated = true;
      result.fp8_eval = std::move(c);
    } else {
      EMBODY_ASSIGN_OR_RETURN(one, EvaluateHeldOut(model, task, e, options.eval_samples));
      ev = std::move(one);
    }
    result.evaluated = true;
    result.eval = ev;
    if (events != nullptr) {
      nlohmann::json event = {{"type", "eval"},
                              {"step", steps},
                              {"samples", ev.samples},
                              {"euler_steps", ev.euler_steps},
                              {"action_mse", ev.action_mse},
                              {"zero_action_mse", ev.zero_action_mse}};
      if (result.fp8_evaluated) {
        const QuantizedPolicy& qs = result.fp8_summary;
        event["fp8"] = Fp8StatsJson(qs.stats);
        event["fp8"]["action_mse"] = result.fp8_eval.fp8.action_mse;
        event["fp8"]["relative_l2"] = result.fp8_eval.relative_l2;
        event["fp8"]["weight_bytes_ratio"] =
            static_cast<double>(qs.fp32_bytes) / static_cast<double>(qs.fp8_bytes);
      }
      events->Post(event);
    }
    if (options.print_progress) {
      std::printf(
          "eval: %d held-out samples, %d Euler steps: action MSE %.4f (predicting zeros: "
          "%.4f)\n",
          ev.samples, ev.euler_steps, ev.action_mse, ev.zero_action_mse);
      if (result.fp8_evaluated) {
        std::printf("eval fp8: action MSE %.4f (%.4fx fp32), actions relative L2 %.4f\n",
                    result.fp8_eval.fp8.action_mse, result.fp8_eval.mse_ratio,
                    result.fp8_eval.relative_l2);
      }
      std::fflush(stdout);
    }
  }
  return result;
}

}  // namespace engine
