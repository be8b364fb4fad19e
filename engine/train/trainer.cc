#include "engine/train/trainer.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "api/dataset_ref.h"
#include "common/log.h"
#include "common/time_util.h"
#include "engine/data/loader.h"
#include "engine/eval/periodic_eval.h"
#include "engine/format/checkpoint_model.h"
#include "engine/model/linear_fast.h"
#include "engine/model/policy_options.h"
#include "engine/optim/adamw.h"
#include "engine/train/precision.h"
#include "engine/train/checkpointer.h"
#include "engine/train/final_eval.h"
#include "engine/train/resume.h"
#include "engine/train/train_data.h"
#include "engine/train/train_state.h"
#include "engine/train/train_step.h"
#include "engine/batches/train_batches.h"

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

// Rank 0's last progress line: the run's totals.
void PrintSummary(const TrainResult& r, int ran, double total, int first_step, int steps) {
  if (ran > 0) {
    std::printf(
        "done: %d steps in %.3f s (%.1f ms/step incl. checkpoints), loss %.4f -> %.4f, "
        "real tokens/s %.4g, samples/s %.3g, padding %.1f%%, data wait %.3f s\n",
        ran, total, r.mean_step_seconds * 1e3, r.losses.front(), r.losses.back(), r.tokens_per_s,
        r.samples_per_s, 100.0 * r.padding_ratio, r.data_wait_seconds);
  } else {
    std::printf("done: the checkpoint is already at step %d of %d\n", first_step, steps);
  }
  std::fflush(stdout);
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
  EMBODY_ASSIGN_OR_RETURN(train_data, TrainData::Open(e, dataset_ref, *config, comm));
  AdamWConfig ac;
  ac.weight_decay = static_cast<float>(e.optim.weight_decay);
  AdamW adam(n, ac);
  // engine.fp8.allreduce: the buckets' sums go over the wire as fp8 with error feedback.
  std::unique_ptr<Fp8Allreduce> fp8_allreduce;
  if (e.fp8.allreduce) fp8_allreduce = std::make_unique<Fp8Allreduce>(comm, n);

  TrainState state{model.params(), n, &adam, fp8_allreduce.get()};

  TrainResult result;
  ResumePoint resumed;
  if (!options.resume_from.empty()) {
    ResumeExpectation want;
    want.model = model_json;
    want.params = n;
    want.seed = e.seed;
    want.steps = e.optim.steps;
    want.dataset_samples = train_data->dataset_samples();
    want.dataset_fingerprint = train_data->dataset_fingerprint();
    EMBODY_ASSIGN_OR_RETURN(at,
                            Resume(options.resume_from, options.resume_newest, want, comm, &state));
    resumed = at;
  }
  result.first_step = resumed.step;
  const int first_step = static_cast<int>(resumed.step);
  uint64_t next_sample = resumed.next_sample;

  const nlohmann::json ckpt_config = CheckpointConfig(e, model_json, world);
  EMBODY_ASSIGN_OR_RETURN(checkpointer, Checkpointer::Create(options.checkpoint_dir, e.checkpoint,
                                                             ckpt_config, comm, events));
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

  const data::PlanConfig plan_config = train_data->PlanFor(rank, world);
  const int64_t global_samples = plan_config.samples_per_step;
  const int samples_per_rank = static_cast<int>(global_samples / world);
  if (leader) {
    common::LogInfo("training", {{"world_size", std::to_string(world)},
                                 {"params", std::to_string(model.layout().num_parameters())},
                                 {"samples_per_rank", std::to_string(samples_per_rank)},
                                 {"gemm_gflops", std::to_string(result.gemm_gflops)},
                                 {"config", ckpt_config["engine"].dump()}});
    train_data->LogDataset();
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

  // Activations for the largest batch expected up front (the model grows them if one is larger):
  // packed rows come out a little above rows_per_step; padded rows are at most the longest sample.
  if (e.data.packing) {
    model.Reserve(e.data.rows_per_step + 2, e.data.tokens_per_row);
  } else {
    model.Reserve(samples_per_rank, train_data->MaxSampleTokens(plan_config));
  }
  data::Loader<TrainBatch>& loader = train_data->StartLoader(
      plan_config, first_step, steps, next_sample, options.prefetch, options.read_threads);
  TrainStepOptions so;
  so.optim = e.optim;
  so.samples_per_step = global_samples;
  so.grad_bucket_bytes = options.grad_bucket_bytes;
  so.fp8_allreduce = fp8_allreduce.get();
  so.gemm_gflops = result.gemm_gflops;
  so.stop_requested = options.stop_requested;
  TrainStep train_step(model, adam, comm, so);

  result.losses.reserve(steps - first_step);
  result.real_tokens.reserve(steps - first_step);
  const double run_start = common::MonotonicSeconds();
  double run_real = 0.0, run_slots = 0.0;
  for (int step = first_step; step < steps; ++step) {
    EMBODY_ASSIGN_OR_RETURN(out, train_step.Run(step, steps, loader, failed_on_every_rank));
    const int done = step + 1;
    next_sample = out.next_sample;
    run_real += out.real_tokens;
    run_slots += out.slots;
    result.losses.push_back(static_cast<float>(out.stats.loss));
    result.real_tokens.push_back(static_cast<int64_t>(out.real_tokens));
    if (events != nullptr) {
      nlohmann::json ev = out.stats.ToJson();
      if (periodic_eval.Due(done)) {  // engine.eval_every: rank 0 alone, the others wait
        *failed_on_every_rank = false;
        EMBODY_RETURN_IF_ERROR(periodic_eval.Run(model, &ev));
        model.TakeFp8ComputeStats();  // the evaluation's products belong to no step
        *failed_on_every_rank = true;
      }
      events->Post(std::move(ev));
    }
    if (leader && options.print_progress && (done % log_every == 0 || done == steps)) {
      std::printf("%s\n", out.stats.ProgressLine().c_str());
      std::fflush(stdout);
    }
    const bool stopping = out.stop_requested && done < steps;
    if (checkpointer.Due(done, steps, stopping)) {
      EMBODY_RETURN_IF_ERROR(checkpointer.Save(done, state, train_data->PositionAt(next_sample)));
      result.last_checkpoint = checkpointer.last_path();
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
  const DataPosition end = train_data->PositionAt(next_sample);
  result.epoch = end.epoch;
  result.in_epoch = end.in_epoch;
  result.data_wait_seconds = loader.data_wait_seconds();
  if (leader && options.print_progress) PrintSummary(result, ran, total, first_step, steps);

  *failed_on_every_rank = false;  // the evaluation (and quantisation) runs on rank 0 alone
  if (leader && !result.stopped) {
    FinalEvalOptions fo;
    fo.step = steps;
    fo.eval_samples = options.eval_samples;
    fo.held_out = train_data->source() == nullptr;
    fo.checkpoint_dir = checkpointer.dir();
    fo.checkpoint_config = ckpt_config;
    fo.print_progress = options.print_progress;
    EMBODY_RETURN_IF_ERROR(
        EvaluateTrainedPolicy(model, train_data->task(), e, fo, events, &result));
  }
  return result;
}

}  // namespace engine
