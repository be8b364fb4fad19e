// The subcommands job starts execute (`exec-rank`, `launch-ranks`, `watch-job`), run by both
// embody-agent (agent/main.cc) and embody-job-exec (agent/job_exec_main.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace agent {

// The exit status of the subcommand `args[0]` names, run with the rest; nullopt when `args`
// names none of them. Called first thing in main: nothing may run before `exec-rank` that
// changes what the rank inherits (a blocked signal mask, say).
std::optional<int> RunJobSubcommand(const std::vector<std::string>& args);

}  // namespace agent
