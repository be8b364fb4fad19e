#include "agent/job_subcommands.h"

#include "agent/jobs/job_watcher.h"
#include "agent/launch/direct_launch.h"
#include "agent/launch/rank_exec.h"

namespace agent {

std::optional<int> RunJobSubcommand(const std::vector<std::string>& args) {
  if (args.empty()) return std::nullopt;
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  // `exec-rank` runs in every rank of a job (agent/launch/rank_exec.h).
  if (args[0] == "exec-rank") return RankExecMain(rest);
  // `launch-ranks`: mpirun's place for a job with "launcher": "direct"
  // (agent/launch/direct_launch.h).
  if (args[0] == "launch-ranks") return LaunchRanksMain(rest);
  // `watch-job`: the watcher of one job (agent/jobs/job_watcher.h), started by the agent.
  if (args[0] == "watch-job") return WatchJobMain(rest);
  return std::nullopt;
}

}  // namespace agent
