// How a job becomes an `mpirun` command line: the hostfile, the argv and the environment.
//
// This is the one place that knows Open MPI's launcher options and environment variables
// (Open MPI 5 renames the run-as-root variables to PRTE_MCA_*; change them here only). It is a
// pure function of its inputs so every variant is unit-tested without starting anything; the
// JobRunner does the fork/exec.
//
// Open MPI 4.1 facts this relies on (checked with 4.1.4):
//  - `--output-filename DIR:nojobid,nocopy` writes DIR/rank.N/stdout and DIR/rank.N/stderr and
//    does not echo rank output on mpirun's own stdout (without `nojobid` the files are under
//    DIR/1/rank.N/; without `nocopy` every line is duplicated into mpirun's output).
//  - mpirun exits with the exit code of the first rank that exited non-zero, and with 128+N when
//    a rank was killed by signal N, so its own exit status is the job's exit code.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "common/status.h"

namespace agent {

struct LaunchInput {
  int64_t job_id = 0;
  nlohmann::json spec;               // the JobSpec JSON from the launch command
  std::vector<api::HostSlot> hosts;  // first is the head (this node)
  std::string local_address;         // this agent's --address
  std::string job_dir;               // <data-dir>/jobs/job-<id>
  std::string checkpoint_dir;        // <data-dir>/checkpoints/job-<id>
  std::string mpirun = "mpirun";
  std::string engine;     // embody-engine path, for engine kinds
  std::string agent_url;  // http://127.0.0.1:PORT
  std::string job_token;
  std::string resume_from;  // checkpoint to resume from; empty: start at step 0
  bool as_root = false;
};

struct LaunchPlan {
  std::string hostfile_path;
  std::string hostfile;           // contents
  std::string ranks_dir;          // --output-filename target
  std::vector<std::string> argv;  // argv[0] is the mpirun path
  // Variables added to (or overriding) the agent's own environment for mpirun.
  std::vector<std::pair<std::string, std::string>> env;
  int total_ranks = 0;
};

// Fails with failed_precondition when a rank would run on another host (not built yet) and with
// invalid_argument for a spec the agent cannot run (no hosts, empty command, ...).
common::Result<LaunchPlan> BuildLaunchPlan(const LaunchInput& in);

// `base` (KEY=VALUE strings, e.g. from environ) with `add` applied; later keys win.
std::vector<std::string> MergeEnvironment(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& add);

}  // namespace agent
