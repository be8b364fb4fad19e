// The `embody` subcommands. Each returns the process exit code; output goes to stdout, errors to
// stderr as "embody: <message>".
#pragma once

#include <string>
#include <vector>

namespace cli {

int RunCli(const std::vector<std::string>& args);

}  // namespace cli
