#include "engine/rl/rl_job.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/log.h"
#include "engine/rl/async_ppo.h"
#include "engine/rl/sync_ppo.h"

namespace engine::rl {

common::Result<RlJobResult> RunRlJob(const api::JobSpec& spec, Communicator& comm,
                                     EventSink* events, const std::atomic<bool>* stop_requested) {
  if (spec.kind != api::JobKind::kRl) return common::InvalidArgument("not a job of kind rl");
  SyncPpoOptions options;
  options.engine = spec.engine;
  options.stop_requested = stop_requested;
  // The final policy goes where a training job's checkpoints go (main.cc: EMBODY_CHECKPOINT_DIR).
  const char* dir = std::getenv("EMBODY_CHECKPOINT_DIR");
  options.checkpoint_dir = dir != nullptr && *dir != '\0' ? dir : "./checkpoints";
  if (const char* from = std::getenv("EMBODY_RESUME_FROM"); from != nullptr && *from != '\0') {
    options.init_from = from;
  }
  const api::RlOptions& rl = spec.engine.rl;
  if (comm.rank() == 0) {
    common::LogInfo(
        rl.any_async() ? "rl: asynchronous PPO" : "rl: synchronous PPO",
        {{"task", spec.engine.rl.task},
         {"disaggregated", rl.disaggregated
                               ? "max_staleness " + std::to_string(rl.max_staleness) +
                                     ", proximal " + rl.proximal + ", stale_lr_scale " +
                                     std::to_string(rl.stale_lr_scale) + ", rollout_ranks " +
                                     std::to_string(rl.rollout_ranks)
                               : "off"},
         {"env_async", rl.env_async ? "on" : "off"},
         {"streaming", rl.streaming ? std::to_string(rl.micro_batches) + " micro-batches" : "off"},
         {"envs_per_rank", std::to_string(spec.engine.rl.envs)},
         {"world_size", std::to_string(comm.world_size())},
         {"init_from", options.init_from.empty() ? "(fresh trunk)" : options.init_from}});
  }
  // With every level off the synchronous loop runs, exactly as before the levels existed.
  EMBODY_ASSIGN_OR_RETURN(result, rl.any_async() ? RunAsyncPpo(options, comm, events)
                                                 : RunSyncPpo(options, comm, events));
  if (comm.rank() == 0 && !result.updates.empty()) {
    const UpdateRecord& last = result.updates.back();
    std::printf(
        "rl: %zu updates, %lld env steps, last success rate %.3f, mean return %.3f, "
        "%.0f env steps/s\n",
        result.updates.size(), static_cast<long long>(last.env_steps),
        std::isfinite(last.success_rate) ? last.success_rate : 0.0,
        std::isfinite(last.mean_return) ? last.mean_return : 0.0, last.env_steps_per_s);
    std::fflush(stdout);
  }
  return RlJobResult{result.stopped};
}

}  // namespace engine::rl
