// embody-job-exec: what job starts execute besides the agent itself (agent/CMakeLists.txt):
// `watch-job` (agent/jobs/job_watcher.h), `launch-ranks` (agent/launch/direct_launch.h) and
// `exec-rank` (agent/launch/rank_exec.h), the same code as `embody-agent <subcommand>`, in a
// binary that loads no library but the C library: the agent's own executable loads its HTTP,
// TLS and metrics libraries at every exec (about four times this binary's CPU per exec;
// docs/benchmarks.md), and a job start execs two or more.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/jobs/job_watcher.h"
#include "agent/launch/direct_launch.h"
#include "agent/launch/rank_exec.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::vector<std::string> rest(args.empty() ? args.end() : args.begin() + 1, args.end());
  // exec-rank first, as in the agent's main: nothing may run before it that changes what the
  // rank inherits.
  if (!args.empty() && args[0] == "exec-rank") return agent::RankExecMain(rest);
  if (!args.empty() && args[0] == "launch-ranks") return agent::LaunchRanksMain(rest);
  if (!args.empty() && args[0] == "watch-job") return agent::WatchJobMain(rest);
  std::fprintf(stderr, "usage: embody-job-exec exec-rank|launch-ranks|watch-job ARGS...\n");
  return 2;
}
