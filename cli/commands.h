// The `embody` subcommands. RunCli parses the command line (command_line.h), then calls the
// server; output goes to `out`, errors to `err` as "embody: <message> (field <field>)". Returns
// the exit code: 0 done, 1 refused by the server or server unreachable, 2 usage error.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "cli/config.h"
#include "common/status.h"

namespace cli {

struct Io {
  std::ostream& out;
  std::ostream& err;
  std::istream& in;
  bool tty = false;  // `out` is a terminal: watch redraws one line
  std::function<common::Result<Config>()> config = LoadConfig;
};

int RunCli(const std::vector<std::string>& args, Io& io);
// With the process's standard streams.
int RunCli(const std::vector<std::string>& args);

}  // namespace cli
