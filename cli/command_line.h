// The `embody` command line: one table of subcommands and flags (CLI11), from which the usage
// text of every command is generated. Parsing only; what each command does is in commands.cc.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace cli {

// Exit codes: 0 done, 1 the server refused or could not be reached (its message printed),
// 2 a usage error (nothing was sent).
inline constexpr int kExitRefused = 1;
inline constexpr int kExitUsage = 2;

struct Invocation {
  std::string command;  // "ls", "show", "tenants create", "nodes drain", ...
  std::string ca_file;  // --ca-file: replaces EMBODY_CA_FILE
  bool json = false;    // --output json: print the server's JSON as it came
  int64_t id = 0;       // the ID argument (job, node, tenant or token)
  // submit, plan (file: the JobSpec or plan request)
  std::string file;
  bool watch = false;
  bool dry_run = false;  // submit: forecast only, nothing submitted
  std::string gpus;     // plan: "256,512,1024"
  std::string cluster;  // plan: the cluster description file
  // ls, audit
  std::string state;
  int limit = 50;
  bool all = false;  // audit: every page
  // logs, events, metrics
  bool follow = false;
  std::optional<int> rank;
  std::optional<int> attempt;  // logs: this attempt's (default: the latest)
  std::string type;
  std::string names;
  std::string since;
  std::optional<int> max_points;
  // tenants create / set, tokens create
  std::string name;
  std::optional<double> weight;
  // "slots" -> 8, or nullopt for "none" (no limit)
  std::map<std::string, std::optional<int64_t>> quota;
  std::optional<int64_t> if_match;  // tenants set: the version read earlier
  std::string role;
  std::optional<int64_t> tenant;
  std::string expires;
  // usage
  std::string from, to;
  // datasets import, datasets upload (name above; path is the local FILE for upload)
  std::string path, filter, language, nan;
  std::string format = "hdf5";    // datasets import: "hdf5" or "lerobot" (a directory)
  std::string resize;             // datasets import, lerobot: "HxW"
  int chunk_mib = 4;              // datasets upload
  std::optional<int64_t> resume;  // datasets upload: the version to continue
  // datasets export (ID in id, DIR in path, --format lerobot)
  double fps = 0;     // 0: the dataset's own
  std::string codec;  // "": av1
};

// Parses `args` (without the program name) into an invocation, or returns the exit code to end
// with: 0 after printing the requested help to `out`, kExitUsage after printing the error and a
// pointer to --help to `err`.
std::variant<Invocation, int> ParseCommandLine(const std::vector<std::string>& args,
                                               std::ostream& out, std::ostream& err);

}  // namespace cli
