#include "engine/policy/held_out_eval.h"

#include <utility>
#include <vector>

#include "engine/batches/train_batches.h"

namespace engine {

common::Result<EvalResult> EvaluateHeldOut(PolicyTransformer& model, const DemoSource& task,
                                           const api::EngineOptions& e, int num_samples) {
  if (num_samples < 1) return common::InvalidArgument("num_samples must be ≥ 1");
  data::PlanConfig pc = PlanConfigFor(e, 0, 1);
  pc.samples_per_step = num_samples;
  auto plan = data::MakePlan(pc, 0, kHeldOutFirstSample);
  if (!plan.ok()) return plan.status();
  TrainBatch tb;
  EMBODY_RETURN_IF_ERROR(FillTrainBatch(task, model.config(), e.data.packing, *plan, &tb));
  PackedBatch& b = tb.batch;
  // Noise and expert chunks in the batch's action-row order (samples in row order).
  const data::PackedRows& rows = e.data.packing ? plan->rows : tb.padded_rows;
  std::vector<float> noise, expert;
  for (int32_t i : rows.sample_index) {
    const PolicySample& s = tb.samples[i];
    noise.insert(noise.end(), s.noise.begin(), s.noise.end());
    expert.insert(expert.end(), s.actions.begin(), s.actions.end());
  }
  std::vector<float> sampled(expert.size());
  const int steps = e.model.inference_steps;
  EMBODY_RETURN_IF_ERROR(model.SampleActions(&b, noise.data(), steps, sampled.data()));
  EvalResult r;
  r.samples = num_samples;
  r.euler_steps = steps;
  for (size_t i = 0; i < expert.size(); ++i) {
    const double d = static_cast<double>(sampled[i]) - expert[i];
    r.action_mse += d * d;
    r.zero_action_mse += static_cast<double>(expert[i]) * expert[i];
  }
  r.action_mse /= static_cast<double>(expert.size());
  r.zero_action_mse /= static_cast<double>(expert.size());
  r.actions = std::move(sampled);
  return r;
}

}  // namespace engine
