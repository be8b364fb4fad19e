#include "engine/train/final_eval.h"

#include <cstdio>
#include <memory>
#include <utility>

#include "common/file_util.h"
#include "engine/format/fp8_checkpoint.h"
#include "engine/policy/held_out_eval.h"
#include "engine/policy/ptq.h"

namespace engine {
namespace {

void PrintQuantised(const TrainResult& r) {
  const fp8::Fp8Stats& st = r.fp8_summary.stats;
  std::printf(
      "fp8: %s%sweights %zu -> %zu bytes (%.3fx), amax %.4g, scales %.3g..%.3g, saturated "
      "%lld, underflowed %lld\n",
      r.fp8_checkpoint.c_str(), r.fp8_checkpoint.empty() ? "" : ": ", r.fp8_summary.fp32_bytes,
      r.fp8_summary.fp8_bytes,
      static_cast<double>(r.fp8_summary.fp32_bytes) / r.fp8_summary.fp8_bytes, st.amax,
      st.scale_min, st.scale_max, static_cast<long long>(st.saturated),
      static_cast<long long>(st.underflowed));
  std::fflush(stdout);
}

nlohmann::json EvalEvent(int step, const TrainResult& r) {
  const EvalResult& ev = r.eval;
  nlohmann::json event = {{"type", "eval"},
                          {"step", step},
                          {"samples", ev.samples},
                          {"euler_steps", ev.euler_steps},
                          {"action_mse", ev.action_mse},
                          {"zero_action_mse", ev.zero_action_mse}};
  if (r.fp8_evaluated) {
    const QuantizedPolicy& qs = r.fp8_summary;
    event["fp8"] = Fp8StatsJson(qs.stats);
    event["fp8"]["action_mse"] = r.fp8_eval.fp8.action_mse;
    event["fp8"]["relative_l2"] = r.fp8_eval.relative_l2;
    event["fp8"]["weight_bytes_ratio"] =
        static_cast<double>(qs.fp32_bytes) / static_cast<double>(qs.fp8_bytes);
  }
  return event;
}

void PrintEval(const TrainResult& r) {
  const EvalResult& ev = r.eval;
  std::printf(
      "eval: %d held-out samples, %d Euler steps: action MSE %.4f (predicting zeros: %.4f)\n",
      ev.samples, ev.euler_steps, ev.action_mse, ev.zero_action_mse);
  if (r.fp8_evaluated) {
    std::printf("eval fp8: action MSE %.4f (%.4fx fp32), actions relative L2 %.4f\n",
                r.fp8_eval.fp8.action_mse, r.fp8_eval.mse_ratio, r.fp8_eval.relative_l2);
  }
  std::fflush(stdout);
}

}  // namespace

common::Status EvaluateTrainedPolicy(PolicyTransformer& model, const DemoSource& task,
                                     const api::EngineOptions& e, const FinalEvalOptions& options,
                                     EventSink* events, TrainResult* result) {
  // engine.fp8.inference: quantise the trained policy, write its FP8 checkpoint, and evaluate
  // from the checkpoint's bytes exactly as a rollout would load them.
  std::unique_ptr<PolicyTransformer> fp8_model;
  if (e.fp8.inference) {
    EMBODY_ASSIGN_OR_RETURN(
        q, QuantizeToFp8Checkpoint(model, options.step, options.checkpoint_config, PtqOptions{},
                                   &result->fp8_summary));
    const std::string bytes = EncodeFp8Checkpoint(q);
    if (!options.checkpoint_dir.empty()) {
      result->fp8_checkpoint =
          options.checkpoint_dir + "/policy-step-" + std::to_string(options.step) + ".fp8";
      EMBODY_RETURN_IF_ERROR(common::WriteFileAtomic(result->fp8_checkpoint, bytes));
    }
    EMBODY_ASSIGN_OR_RETURN(decoded, DecodeFp8Checkpoint(bytes));
    EMBODY_ASSIGN_OR_RETURN(loaded, PolicyFromFp8Checkpoint(decoded, nullptr));
    fp8_model = std::move(loaded);
    if (options.print_progress) PrintQuantised(*result);
  }
  if (options.eval_samples <= 0 || !options.held_out) return common::Status::Ok();
  if (fp8_model != nullptr) {
    EMBODY_ASSIGN_OR_RETURN(c, CompareFp8Eval(model, *fp8_model, e, options.eval_samples));
    result->eval = c.fp32;
    result->fp8_evaluated = true;
    result->fp8_eval = std::move(c);
  } else {
    EMBODY_ASSIGN_OR_RETURN(one, EvaluateHeldOut(model, task, e, options.eval_samples));
    result->eval = std::move(one);
  }
  result->evaluated = true;
  if (events != nullptr) events->Post(EvalEvent(options.step, *result));
  if (options.print_progress) PrintEval(*result);
  return common::Status::Ok();
}

}  // namespace engine
