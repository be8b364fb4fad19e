// A job of kind "eval" in embody-engine (its entry is jobs::Eval, job.h): loads the checkpoint
// the server resolved from the spec's eval block (the agent materialises it as
// EMBODY_RESUME_FROM), evaluates its policy on each of eval.tasks (episodes.h), prints a table on
// stdout and posts one `eval` event:
//   {"type": "eval", "policy": "bc" | "rl", "fp8": bool, "checkpoint_step": N, "seed": S,
//    "tasks": [{"task", "episodes", "successes", "success_rate", "mean_return", "mean_length"}]}
// which the server stores per task (GET /v1/jobs/{id}/evaluation). Runs on rank 0; an eval spec
// has one rank.
#pragma once

#include <string>
#include <vector>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/eval/episodes.h"
#include "engine/report/event_sink.h"

namespace engine::eval {

struct EvalJobResult {
  std::string policy;  // "bc", "rl"
  bool fp8 = false;
  int64_t checkpoint_step = 0;
  std::vector<TaskEvalResult> tasks;
};

// `checkpoint_path`: the file to evaluate. Errors: no checkpoint, one that cannot be read or
// loaded, a task the policy cannot act in (action_dim), an evaluation error.
common::Result<EvalJobResult> RunEvalJob(const api::JobSpec& spec,
                                         const std::string& checkpoint_path, EventSink* events);

}  // namespace engine::eval
