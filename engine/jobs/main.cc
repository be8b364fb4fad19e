// embody-engine --spec job.json: runs one "train", "rl" or "eval" job as one MPI rank (see
// docs/contracts.md); each kind's entry is in engine/jobs/ (job.h).
// embody-engine quantize --in CKPT --out CKPT8: post-training FP8 quantisation of a trained
// policy (engine/jobs/quantize.cc); no MPI.
//
// This file is the dispatcher: the command line, the launch context (engine/jobs/job_context.h:
// the spec and the agent's EMBODY_* variables, read once), MPI, the SIGTERM flag, rank 0's event
// reporter and the exit status. Exit status: 0 on success; 2 on a bad command line or spec;
// 128 + SIGTERM when asked to stop; 1 on any other failure.
#include <mpi.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/log.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/jobs/job.h"
#include "engine/jobs/job_context.h"
#include "engine/report/event_reporter.h"

namespace {

constexpr const char* kUsage =
    "usage: embody-engine --spec JOB.json\n"
    "       embody-engine quantize --in CKPT --out CKPT8 [--eval-samples N] [--embeddings]\n"
    "                              [--action-head]\n"
    "\n"
    "Trains the built-in policy transformer as described by a JobSpec of kind \"train\", then\n"
    "evaluates its sampled actions on held-out data; or, for kind \"rl\", trains it with PPO on a\n"
    "built-in simulated task; or, for kind \"eval\", runs the policy of the checkpoint in\n"
    "EMBODY_RESUME_FROM on the built-in tasks. Run one process per rank under mpirun.\n"
    "Environment: EMBODY_AGENT_URL, EMBODY_JOB_ID, EMBODY_JOB_TOKEN (post step and eval events\n"
    "to the node agent), EMBODY_CHECKPOINT_DIR (default ./checkpoints), EMBODY_RESUME_FROM\n"
    "(checkpoint file to continue from, on any number of ranks).\n";

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "embody-engine: %s\n", msg.c_str());
  return code;
}

// Set by SIGTERM; jobs check it once per step or update.
std::atomic<bool> g_stop_requested{false};
extern "C" void OnSigterm(int) { g_stop_requested.store(true); }

}  // namespace

int main(int argc, char** argv) {
  common::InitLog("engine");
  if (argc > 1 && std::strcmp(argv[1], "quantize") == 0) {
    return engine::jobs::Quantize(argc - 1, argv + 1);
  }
  std::string spec_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (std::strcmp(argv[i], "--spec") == 0 && i + 1 < argc) {
      spec_path = argv[++i];
    } else if (std::strncmp(argv[i], "--spec=", 7) == 0) {
      spec_path = argv[i] + 7;
    } else {
      std::fputs(kUsage, stderr);
      return Fail(2, std::string("unexpected argument: ") + argv[i]);
    }
  }
  if (spec_path.empty()) {
    std::fputs(kUsage, stderr);
    return Fail(2, "--spec is required");
  }

  // Everything that can be wrong with the input is reported before MPI starts.
  auto context = engine::JobContext::Parse(
      spec_path, [](const char* name) { return static_cast<const char*>(std::getenv(name)); });
  if (!context.ok()) return Fail(2, context.status().message());
  const engine::jobs::JobEntry run = engine::jobs::EntryFor(context->spec.kind);

  // The data loader runs threads that never call MPI: FUNNELED is the level that allows them.
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  // After MPI_Init, so that ours is the handler in place: a SIGTERM (preemption, cancel) finishes
  // the step in flight and writes a checkpoint instead of losing the work since the last one.
  struct sigaction on_term {};
  on_term.sa_handler = OnSigterm;
  sigemptyset(&on_term.sa_mask);
  sigaction(SIGTERM, &on_term, nullptr);
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    return Fail(1,
                "MPI does not support threads (provided level " + std::to_string(provided) + ")");
  }
  int code = 0;
  {  // the communicator frees its own communicators before MPI_Finalize below
    engine::MpiCommunicator comm;
    std::unique_ptr<engine::HttpEventReporter> reporter;
    if (comm.rank() == 0) {
      if (auto cfg = context->env.Reporter()) {
        common::LogInfo("posting events to the agent",
                        {{"agent_url", cfg->agent_url}, {"job_id", cfg->job_id}});
        reporter = std::make_unique<engine::HttpEventReporter>(*cfg);
      }
    }
    engine::jobs::JobEnd end = run(*context, comm, reporter.get(), &g_stop_requested);
    if (reporter != nullptr) reporter->Close();  // flush the last events before exiting
    if (!end.error.empty()) {
      Fail(1, end.error);
      // A failure on one rank alone would leave the others blocked in a collective.
      if (end.abort_others) MPI_Abort(MPI_COMM_WORLD, 1);
      code = 1;
    } else if (end.stopped) {
      code = 128 + SIGTERM;  // the checkpoint is written; the run can resume from it
    }
  }
  MPI_Finalize();
  return code;
}
