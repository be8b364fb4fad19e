// A job of kind "rl" in embody-engine: the spec's engine options and the process environment
// (EMBODY_RESUME_FROM: the checkpoint file the agent materialised from the spec's init_from)
// turned into a synchronous PPO run (sync_ppo.h), with its closing line on rank 0's stdout.
#pragma once

#include <atomic>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/report/event_sink.h"

namespace engine::rl {

struct RlJobResult {
  bool stopped = false;  // SIGTERM: the run ended early
};

common::Result<RlJobResult> RunRlJob(const api::JobSpec& spec, Communicator& comm,
                                     EventSink* events, const std::atomic<bool>* stop_requested);

}  // namespace engine::rl
