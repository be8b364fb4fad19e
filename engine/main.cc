// embody-engine --spec job.json: runs one "train", "rl" or "eval" job as one MPI rank (see
// docs/contracts.md; kind "rl" is engine/rl/rl_job.h, kind "eval" engine/eval/eval_job.h).
// embody-engine quantize --in CKPT --out CKPT8: post-training FP8 quantisation of a trained
// policy (engine/quantize_command.h); no MPI.
//
// Environment: EMBODY_AGENT_URL, EMBODY_JOB_ID, EMBODY_JOB_TOKEN (step events go to the agent;
// unset URL: no posting), EMBODY_CHECKPOINT_DIR (default ./checkpoints), EMBODY_RESUME_FROM (a
// checkpoint file to continue from; the agent sets it when it restarts a job).
// Exit status: 0 on success; 2 on a bad command line or spec; 1 on any other failure.
#include <mpi.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "api/job_spec.h"
#include "common/file_util.h"
#include "common/log.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/eval/eval_job.h"
#include "engine/quantize_command.h"
#include "engine/report/event_reporter.h"
#include "engine/rl/rl_job.h"
#include "engine/trainer.h"

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

}  // namespace

namespace {
// Set by SIGTERM; the trainer checks it once per step (TrainerOptions::stop_requested).
std::atomic<bool> g_stop_requested{false};
extern "C" void OnSigterm(int) { g_stop_requested.store(true); }
}  // namespace

int main(int argc, char** argv) {
  common::InitLog("engine");
  if (argc > 1 && std::strcmp(argv[1], "quantize") == 0) {
    return engine::RunQuantizeCommand(argc - 1, argv + 1);
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
  auto text = common::ReadFile(spec_path);
  if (!text.ok()) return Fail(2, "cannot read spec: " + text.status().message());
  auto spec = api::ParseJobSpecText(*text, api::SpecLimits{});
  if (!spec.ok()) return Fail(2, "invalid spec " + spec_path + ": " + spec.status().ToString());
  if (spec->kind != api::JobKind::kTrain && spec->kind != api::JobKind::kRl &&
      spec->kind != api::JobKind::kEval) {
    return Fail(2, std::string("spec kind is \"") + api::JobKindName(spec->kind) +
                       "\"; embody-engine runs kinds \"train\", \"rl\" and \"eval\"");
  }

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
      if (auto cfg = engine::ReporterConfig::FromEnv()) {
        common::LogInfo("posting events to the agent",
                        {{"agent_url", cfg->agent_url}, {"job_id", cfg->job_id}});
        reporter = std::make_unique<engine::HttpEventReporter>(*cfg);
      }
    }
    if (spec->kind == api::JobKind::kEval) {
      const char* from = std::getenv("EMBODY_RESUME_FROM");
      auto ev = engine::eval::RunEvalJob(*spec, from != nullptr ? from : "", reporter.get());
      if (reporter != nullptr) reporter->Close();
      if (!ev.ok()) {
        Fail(1, ev.status().ToString());
        code = 1;
      }
    } else if (spec->kind == api::JobKind::kRl) {
      auto rl = engine::rl::RunRlJob(*spec, comm, reporter.get(), &g_stop_requested);
      if (reporter != nullptr) reporter->Close();
      if (!rl.ok()) {
        Fail(1, "rank " + std::to_string(comm.rank()) + ": " + rl.status().ToString());
        // An error on one rank alone would leave the others blocked in a collective.
        if (comm.world_size() > 1) MPI_Abort(MPI_COMM_WORLD, 1);
        code = 1;
      } else if (rl->stopped) {
        code = 128 + SIGTERM;
      }
    } else {
      engine::TrainerOptions options;
      options.engine = spec->engine;
      options.measure_gemm_ceiling = true;  // step events report mfu against this machine's GEMMs
      options.eval_samples = 64;            // the closing `eval` event: sampled vs expert actions
      const char* dir = std::getenv("EMBODY_CHECKPOINT_DIR");
      options.checkpoint_dir = dir != nullptr && *dir != '\0' ? dir : "./checkpoints";
      if (const char* resume = std::getenv("EMBODY_RESUME_FROM"); resume != nullptr) {
        options.resume_from = resume;
        options.resume_newest = true;  // set by the agent for a restart: see docs/contracts.md
      }
      options.stop_requested = &g_stop_requested;
      bool failed_on_every_rank = false;
      auto result = engine::Train(options, comm, reporter.get(), &failed_on_every_rank);
      if (reporter != nullptr) reporter->Close();  // flush the last events before exiting
      if (!result.ok()) {
        Fail(1, "rank " + std::to_string(comm.rank()) + ": " + result.status().ToString());
        // A failure on one rank alone would leave the others blocked in a collective; one that
        // every rank returned together (bad data, checkpoint I/O) ends each of them normally, so
        // every rank's message reaches its log.
        if (comm.world_size() > 1 && !failed_on_every_rank) MPI_Abort(MPI_COMM_WORLD, 1);
        code = 1;
      } else if (result->stopped) {
        // Asked to stop (preemption, cancel): the checkpoint is written, the run can resume from
        // it. 128 + SIGTERM says how it ended.
        if (comm.rank() == 0) {
          std::printf("stopped on SIGTERM after step %lld; checkpoint %s\n",
                      static_cast<long long>(result->first_step + result->losses.size()),
                      result->last_checkpoint.c_str());
          std::fflush(stdout);
        }
        code = 128 + SIGTERM;
      }
    }
  }
  MPI_Finalize();
  return code;
}
