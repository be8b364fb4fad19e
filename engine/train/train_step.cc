#include "engine/train/train_step.h"

#include <cmath>
#include <string>
#include <utility>

#include "common/time_util.h"
#include "engine/dist/agree_on_failure.h"
#include "engine/dist/agree_on_stop.h"

namespace engine {

TrainStep::TrainStep(PolicyTransformer& model, AdamW& adam, Communicator& comm,
                     TrainStepOptions options)
    : model_(model),
      adam_(adam),
      comm_(comm),
      options_(std::move(options)),
      buckets_(comm, model.grads(), model.num_params(),
               GradBucketOptions{options_.grad_bucket_bytes, options_.fp8_allreduce}) {
  hooks_.ready = buckets_.ReadyCallback();
  hooks_.poll = [this] { buckets_.Poll(); };
}

common::Result<StepOutcome> TrainStep::Run(int step, int steps, data::Loader<TrainBatch>& loader,
                                           bool* failed_on_every_rank) {
  *failed_on_every_rank = true;
  const int world = comm_.world_size();
  const double t0 = common::MonotonicSeconds();
  auto item = loader.Next();
  if (world > 1) {
    EMBODY_RETURN_IF_ERROR(AgreeOnFailure(item.status(), comm_,
                                          "to load step " + std::to_string(step + 1) + "'s data"));
  } else if (!item.ok()) {
    return item.status();
  }
  const TrainBatch& tb = *item->batch;
  // Global real tokens, slots and useful FLOPs: one small all-reduce, started first so it
  // completes alongside the gradient buckets. The fourth counts ranks asked to stop: every rank
  // learns it in the same step.
  const bool stop_here = Raised(options_.stop_requested);
  double figures[4] = {static_cast<double>(tb.real_tokens), static_cast<double>(tb.slots),
                       tb.useful_flops, stop_here ? 1.0 : 0.0};
  const CollectiveId figures_id = comm_.StartAllreduceSum(figures, 4);
  const double t_data = common::MonotonicSeconds();

  model_.ZeroGrad();
  auto local_loss = model_.Forward(tb.batch);
  if (!local_loss.ok()) {
    comm_.Wait(figures_id);
    *failed_on_every_rank = false;  // a batch this rank built; the others go on
    return local_loss.status();
  }
  const double t_fwd = common::MonotonicSeconds();
  buckets_.Begin(tb.batch.WeightTotal(), *local_loss);
  common::Status backward = model_.Backward(&hooks_);
  const double t_bwd = common::MonotonicSeconds();
  const Fp8ComputeStats fp8_compute = model_.TakeFp8ComputeStats();  // this rank's, this step's
  const GlobalStepTotals totals = buckets_.Finish();
  comm_.Wait(figures_id);
  if (!backward.ok()) {
    *failed_on_every_rank = false;
    return backward;
  }
  const double loss = totals.loss;
  const double t_comm = common::MonotonicSeconds();
  StepOutcome out;
  out.next_sample = item->plan.global_end;
  loader.Recycle(std::move(item->batch));
  if (!std::isfinite(loss)) {
    return common::Internal("loss is not finite at step " + std::to_string(step + 1) +
                            " (diverged; lower engine.optim.lr)");
  }
  const size_t n = model_.num_params();
  const float* g = model_.grads();
  double sq = 0.0;
  for (size_t i = 0; i < n; ++i) sq += static_cast<double>(g[i]) * g[i];
  const double lr = LearningRate(step, options_.optim.lr, options_.optim.warmup_steps, steps);
  adam_.Step(model_.params(), model_.grads(), static_cast<float>(lr));
  const double t1 = common::MonotonicSeconds();

  const double real = figures[0], slots = figures[1], flops = figures[2];
  out.real_tokens = real;
  out.slots = slots;
  out.stop_requested = figures[3] > 0;
  StepStats& s = out.stats;
  s.step = step + 1;
  s.steps = steps;
  s.loss = loss;
  s.lr = lr;
  s.grad_norm = std::sqrt(sq);
  s.step_seconds = t1 - t0;
  s.tokens_per_s = real / s.step_seconds;
  s.samples_per_s = static_cast<double>(options_.samples_per_step) / s.step_seconds;
  s.data_wait_seconds = t_data - t0;
  s.forward_seconds = t_fwd - t_data;
  s.backward_seconds = t_bwd - t_fwd;
  s.allreduce_seconds = t_comm - t_bwd;
  s.optimizer_seconds = t1 - t_comm;
  s.padding_ratio = slots > 0 ? 1.0 - real / slots : 0.0;
  s.packing_efficiency = slots > 0 ? real / slots : 1.0;
  s.world_size = world;
  if (world > 1) {
    s.grad_wire_bytes = totals.wire_bytes;
    s.grad_wire_bytes_fp32 = totals.wire_bytes_fp32;
  }
  if (totals.fp8.elements > 0) s.fp8_allreduce = totals.fp8;
  if (model_.fp8_compute()) {
    s.fp8_compute_e4m3 = fp8_compute.e4m3;
    s.fp8_compute_e5m2 = fp8_compute.e5m2;
  }
  if (options_.gemm_gflops > 0.0) {
    s.mfu = flops / s.step_seconds / (options_.gemm_gflops * 1e9);
  }
  return out;
}

}  // namespace engine
