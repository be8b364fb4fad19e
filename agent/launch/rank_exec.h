// `embody-agent exec-rank [--address-space BYTES] FILE`: what every rank of a job runs under mpirun
// (agent/launch/mpi_launch.h says why). It reads the job's argv from FILE ({"argv": [...]}, and
// "launcher": "torchrun" when each process is a node's torchrun; written by the agent), lowers
// RLIMIT_AS to BYTES when given (the per-rank memory limit of a node without cgroups; rlimits are
// per process, so the limit is set here, in the rank, rather than on mpirun) and execs the argv in
// place, with the environment it was given (under the default launcher a rank other than 0 also
// preloads the store wait FILE's "rendezvous_wait" names, agent/launch/rendezvous_wait.h); for an
// image job (a "container" block in FILE) it execs crun with the argv inside the image instead
// (agent/launch/container_exec.h). It runs as the job's uid and can only lower limits, never
// raise them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace agent {

// `args` excludes "exec-rank". Returns only on failure: the exit code (127), after saying why
// on stderr (the rank's log).
int RankExecMain(const std::vector<std::string>& args);

// Points this process's stdout and stderr at <dir>/rank.RANK/{stdout,stderr} (the directory made
// 0700 if missing; files appended, never followed through a link): the layout mpirun's
// --output-filename DIR:nojobid makes, which agent/jobs/rank_logs.h reads. Returns "" or why not.
std::string RedirectRankOutput(const std::string& dir, int64_t rank);

}  // namespace agent
