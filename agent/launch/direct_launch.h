// `embody-agent launch-ranks --ranks N --output DIR [--grace-s S] [--address-space BYTES] FILE`:
// the launcher of a one-node command job with `"launcher": "direct"`, in mpirun's place. The agent
// spawns it exactly as it spawns mpirun (agent/sandbox/spawn.h: the job's uid, its cgroup, rlimits,
// no_new_privs, a new session, its output the launcher log), so the sandbox, the kill (SIGTERM to
// the ranks, SIGKILL after the grace, then the cgroup and uid swept) and the wait are the same.
//
// It forks the N ranks itself. Each rank gets a process group of its own (as under mpirun), its
// stdout and stderr in DIR/rank.R/{stdout,stderr} (the layout mpirun's --output-filename
// DIR:nojobid writes and agent/jobs/rank_logs.h reads), and the variables Open MPI gives a rank on
// one node (DirectRankEnvironment), then runs as exec-rank would (agent/launch/rank_exec.h:
// RLIMIT_AS, torch's RANK, WORLD_SIZE, ... from those variables, then exec of FILE's argv). There
// is no PMIx server: an MPI program started this way would initialise as N singletons, which is why
// the launcher is chosen by the spec and never guessed (docs/contracts.md).
//
// It exits as mpirun does: with the exit code of the first rank that ended non-zero (128+N for a
// rank killed by signal N), 0 when all succeeded. When a rank fails while others run, the others
// get SIGTERM and, after the grace, SIGKILL, as mpirun aborts a job.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace agent {

// What Open MPI 4.1 sets for rank `rank` of `size` ranks, all on one node.
std::vector<std::pair<std::string, std::string>> DirectRankEnvironment(int rank, int size);

// `args` excludes "launch-ranks". Returns the exit code (2 for bad arguments, saying why on
// stderr: the launcher log).
int LaunchRanksMain(const std::vector<std::string>& args);

}  // namespace agent
