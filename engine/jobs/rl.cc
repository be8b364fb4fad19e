// Kind "rl" (job.h): the spec's engine options and the launch context (the checkpoint the agent
// materialised from the spec's init_from, the checkpoint directory) turned into a PPO run,
// synchronous (engine/rl/sync_ppo.h) or asynchronous (engine/rl/async_ppo.h), with its closing
// line on rank 0's stdout.
#include <cmath>
#include <cstdio>
#include <string>

#include "common/log.h"
#include "engine/jobs/job.h"
#include "engine/rl/async_ppo.h"
#include "engine/rl/sync_ppo.h"

namespace engine::jobs {

JobEnd Rl(const JobContext& context, Communicator& comm, EventSink* events,
          const std::atomic<bool>* stop_requested) {
  const api::JobSpec& spec = context.spec;
  rl::SyncPpoOptions options;
  options.engine = spec.engine;
  options.stop_requested = stop_requested;
  // The final policy goes where a training job's checkpoints go.
  options.checkpoint_dir = context.env.checkpoint_dir;
  options.init_from = context.env.resume_from;  // the agent's copy of the spec's init_from
  const api::RlOptions& rl_options = spec.engine.rl;
  if (comm.rank() == 0) {
    common::LogInfo(
        rl_options.any_async() ? "rl: asynchronous PPO" : "rl: synchronous PPO",
        {{"task", spec.engine.rl.task},
         {"disaggregated", rl_options.disaggregated
                               ? "max_staleness " + std::to_string(rl_options.max_staleness) +
                                     ", proximal " + rl_options.proximal + ", stale_lr_scale " +
                                     std::to_string(rl_options.stale_lr_scale) +
                                     ", rollout_ranks " + std::to_string(rl_options.rollout_ranks)
                               : "off"},
         {"env_async", rl_options.env_async ? "on" : "off"},
         {"streaming", rl_options.streaming
                           ? std::to_string(rl_options.micro_batches) + " micro-batches"
                           : "off"},
         {"envs_per_rank", std::to_string(spec.engine.rl.envs)},
         {"world_size", std::to_string(comm.world_size())},
         {"init_from", options.init_from.empty() ? "(fresh trunk)" : options.init_from}});
  }
  // With every level off the synchronous loop runs, exactly as before the levels existed.
  auto run = rl_options.any_async() ? rl::RunAsyncPpo(options, comm, events)
                                    : rl::RunSyncPpo(options, comm, events);
  if (!run.ok()) {
    // An error on one rank alone would leave the others blocked in a collective.
    return {"rank " + std::to_string(comm.rank()) + ": " + run.status().ToString(), false,
            comm.world_size() > 1};
  }
  const auto& result = *run;
  if (comm.rank() == 0 && !result.updates.empty()) {
    const rl::UpdateRecord& last = result.updates.back();
    std::printf(
        "rl: %zu updates, %lld env steps, last success rate %.3f, mean return %.3f, "
        "%.0f env steps/s\n",
        result.updates.size(), static_cast<long long>(last.env_steps),
        std::isfinite(last.success_rate) ? last.success_rate : 0.0,
        std::isfinite(last.mean_return) ? last.mean_return : 0.0, last.env_steps_per_s);
    std::fflush(stdout);
  }
  JobEnd end;
  end.stopped = result.stopped;
  return end;
}

}  // namespace engine::jobs
