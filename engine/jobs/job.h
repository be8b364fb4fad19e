// The job kinds embody-engine runs, one entry each (train.cc, rl.cc, eval.cc) with one signature,
// and the quantize command (quantize.cc), which is not a job: it runs from a command line, without
// a spec, MPI or an agent.
//
// An entry runs the job on this rank and says how it ended; main() (main.cc) owns
// everything around it: MPI, the SIGTERM flag, the event reporter and the exit status.
#pragma once

#include <atomic>
#include <string>

#include "engine/dist/communicator.h"
#include "engine/jobs/job_context.h"
#include "engine/report/event_sink.h"

namespace engine::jobs {

struct JobEnd {
  std::string error;     // the failure, as printed after "embody-engine: "; "" on success
  bool stopped = false;  // asked to stop (SIGTERM) and did so cleanly: exit 128 + SIGTERM
  // The failure is this rank's alone: the other ranks may be waiting in a collective and must be
  // aborted. A failure every rank returned together ends each of them normally.
  bool abort_others = false;
};

// `events`: rank 0's reporter, nullptr elsewhere and without an agent. `stop_requested`: set on
// SIGTERM; the job checks it once per step or update.
using JobEntry = JobEnd (*)(const JobContext& context, Communicator& comm, EventSink* events,
                            const std::atomic<bool>* stop_requested);

// Kind "train": the trainer (engine/train/), then the closing evaluation on held-out data.
JobEnd Train(const JobContext& context, Communicator& comm, EventSink* events,
             const std::atomic<bool>* stop_requested);
// Kind "rl": PPO, synchronous or asynchronous as the spec's engine.rl says.
JobEnd Rl(const JobContext& context, Communicator& comm, EventSink* events,
          const std::atomic<bool>* stop_requested);
// Kind "eval": the checkpoint in EMBODY_RESUME_FROM on the spec's tasks; one rank.
JobEnd Eval(const JobContext& context, Communicator& comm, EventSink* events,
            const std::atomic<bool>* stop_requested);

// The entry for a kind JobContext::Parse accepts (train, rl, eval).
JobEntry EntryFor(api::JobKind kind);

// `embody-engine quantize --in CKPT --out CKPT8 ...`; argv[0] is "quantize". Exit status: 0
// done; 2 bad command line; 1 any other failure.
int Quantize(int argc, char** argv);

}  // namespace engine::jobs
