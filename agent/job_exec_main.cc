// embody-job-exec: what job starts execute besides the agent itself (agent/CMakeLists.txt):
// `watch-job` (agent/jobs/job_watcher.h), `launch-ranks` (agent/launch/direct_launch.h) and
// `exec-rank` (agent/launch/rank_exec.h), the same code as `embody-agent <subcommand>`, in a
// binary that loads no library but the C library: the agent's own executable loads its HTTP,
// TLS and metrics libraries at every exec (about four times this binary's CPU per exec;
// docs/benchmarks.md), and a job start execs two or more.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/job_subcommands.h"

int main(int argc, char** argv) {
  if (auto status = agent::RunJobSubcommand(std::vector<std::string>(argv + 1, argv + argc))) {
    return *status;
  }
  std::fprintf(stderr, "usage: embody-job-exec exec-rank|launch-ranks|watch-job ARGS...\n");
  return 2;
}
