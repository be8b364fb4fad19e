// Kind "train" (job.h): the trainer over the spec's engine options, with the launch context's
// checkpoint directory and resume file.
#include <cstdio>
#include <string>

#include "engine/jobs/job.h"
#include "engine/train/trainer.h"

namespace engine::jobs {

JobEnd Train(const JobContext& context, Communicator& comm, EventSink* events,
             const std::atomic<bool>* stop_requested) {
  TrainerOptions options;
  options.engine = context.spec.engine;
  options.measure_gemm_ceiling = true;  // step events report mfu against this machine's GEMMs
  options.eval_samples = 64;            // the closing `eval` event: sampled vs expert actions
  options.checkpoint_dir = context.env.checkpoint_dir;
  if (!context.env.resume_from.empty()) {
    options.resume_from = context.env.resume_from;
    options.resume_newest = true;  // set by the agent for a restart: see docs/contracts.md
  }
  options.stop_requested = stop_requested;
  bool failed_on_every_rank = false;
  auto result = engine::Train(options, comm, events, &failed_on_every_rank);
  JobEnd end;
  if (!result.ok()) {
    end.error = "rank " + std::to_string(comm.rank()) + ": " + result.status().ToString();
    // One that every rank returned together (bad data, checkpoint I/O) ends each of them
    // normally, so every rank's message reaches its log.
    end.abort_others = comm.world_size() > 1 && !failed_on_every_rank;
  } else if (result->stopped) {
    // Asked to stop (preemption, cancel): the checkpoint is written, the run can resume from it.
    if (comm.rank() == 0) {
      std::printf("stopped on SIGTERM after step %lld; checkpoint %s\n",
                  static_cast<long long>(result->first_step + result->losses.size()),
                  result->last_checkpoint.c_str());
      std::fflush(stdout);
    }
    end.stopped = true;
  }
  return end;
}

}  // namespace engine::jobs
