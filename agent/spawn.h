// Starting a program in a new session with its output in a file: the fork/exec half of the
// launcher, kept apart so the job logic above it reads without file-descriptor plumbing.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // complete environment, KEY=VALUE
  std::string cwd;
  std::string output_path;  // stdout and stderr, appended; stdin is /dev/null
};

// Forks, calls setsid() (the child leads a new session and process group whose id is its pid),
// restores default signal handling and an empty signal mask, closes every other descriptor and
// execs. Returns the child's pid once exec succeeded; an exec failure (no such program, ...) is
// returned as an error and the child is already reaped.
common::Result<pid_t> SpawnInNewSession(const SpawnRequest& request);

}  // namespace agent
