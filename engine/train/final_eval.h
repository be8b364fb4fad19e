// FinalEvaluation: what rank 0 does with the trained policy after the last step of a run that
// was not stopped early.
//
// With engine.fp8.inference it quantises the policy (engine/policy/ptq.h), writes its FP8
// checkpoint (policy-step-<N>.fp8 in the checkpoint directory, when there is one) and loads it back
// from those bytes, exactly as a rollout would. With eval_samples > 0 on the built-in stream it
// samples actions on held-out reach tasks (engine/policy/held_out_eval.h), fp32 and, when
// quantised, fp8 side by side on the same samples, and reports one {"type":"eval"} event. Errors
// are rank 0's alone: the other ranks are done by then.
//
// Evaluation during training (engine.eval_every) is engine/eval/periodic_eval.h's.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/model/policy_transformer.h"
#include "engine/report/event_sink.h"
#include "engine/sim/demo_source.h"
#include "engine/train/trainer.h"

namespace engine {

struct FinalEvalOptions {
  int step = 0;                      // the run's last step, which the event and the FP8 file name
  int eval_samples = 0;              // held-out samples; 0: no evaluation
  bool held_out = true;              // false on a dataset: it has no held-out simulator tasks
  std::string checkpoint_dir;        // absolute; empty: the FP8 checkpoint is not written
  nlohmann::json checkpoint_config;  // stored in the FP8 checkpoint
  bool print_progress = true;
};

// Fills result's fp8_* and eval fields (and `evaluated`); `events` may be null.
common::Status EvaluateTrainedPolicy(PolicyTransformer& model, const DemoSource& task,
                                     const api::EngineOptions& e, const FinalEvalOptions& options,
                                     EventSink* events, TrainResult* result);

}  // namespace engine
