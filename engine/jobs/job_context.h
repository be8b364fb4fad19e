// JobContext: everything embody-engine is told at launch, parsed once in main() before MPI
// starts: the job spec (--spec FILE) and the agent's environment (api/launch_env.h). Nothing
// else in the engine reads the launch environment; each job (engine/jobs/job.h) takes what it
// needs from here.
//
// One rule per variable, written where it is read (FromEnvironment):
//   EMBODY_AGENT_URL        unset or empty: no agent, events are not posted
//   EMBODY_JOB_ID           "" when unset
//   EMBODY_JOB_TOKEN        "" when unset
//   EMBODY_CA_FILE          "" when unset: the system's CAs
//   EMBODY_CHECKPOINT_DIR   unset or empty: ./checkpoints
//   EMBODY_RESUME_FROM      unset or empty: nothing to continue from (the agent sets it only when
//                           there is a file; an empty value is the same as none, for every kind)
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/report/event_reporter.h"

namespace engine {

// The value of an environment variable, or nullptr when it is unset (std::getenv's contract).
using EnvLookup = std::function<const char*(const char* name)>;

// The launch environment, by the rules above.
struct LaunchEnv {
  std::string agent_url;
  std::string job_id;
  std::string job_token;
  std::string ca_file;
  std::string checkpoint_dir = "./checkpoints";
  std::string resume_from;  // "": a fresh start

  static LaunchEnv FromEnvironment(const EnvLookup& getenv);

  // Where rank 0 posts its events; nullopt without an agent.
  std::optional<ReporterConfig> Reporter() const;
};

struct JobContext {
  std::string spec_path;
  api::JobSpec spec;  // of kind train, rl or eval
  LaunchEnv env;

  // Reads and checks the spec at `spec_path` and the environment. Errors (invalid_argument,
  // message ready for the user): an unreadable file, an invalid spec, a kind embody-engine does
  // not run.
  static common::Result<JobContext> Parse(const std::string& spec_path, const EnvLookup& getenv);
};

}  // namespace engine
