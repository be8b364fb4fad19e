// Starting a program in a new session with its output in a file: the fork/exec half of the
// launcher, kept apart so the job logic above it reads without file-descriptor plumbing.
//
// The child can be put in a sandbox before it execs (agent/sandbox/sandbox.h says what the sandbox
// is): it joins cgroups, lowers its rlimits, sets no_new_privs and drops to a uid and gid of its
// own (with exactly the supplementary groups the credentials name), in that order, so that by the
// time the program runs nothing it inherited can be undone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

// An unprivileged identity: uid and gid and, at most, one supplementary group (the job's
// tenant's, which opens that tenant's datasets: agent/sandbox/sandbox.h).
struct JobCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::optional<gid_t> group = std::nullopt;  // the one supplementary group; none: no others
};

// setrlimit(resource) with soft = hard = value, so the job cannot raise it again (a value above
// the agent's own hard limit becomes that limit: limits only go down).
struct ResourceLimit {
  int resource = 0;  // RLIMIT_*
  uint64_t value = 0;
};

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` when it has no '/'
  std::vector<std::string> env;   // complete environment, KEY=VALUE
  std::string cwd;                // entered after the uid switch, so with the job's rights
  std::string output_path;        // stdout and stderr, appended; stdin is /dev/null
  // cgroup.procs files the child writes itself into (v2: one; v1: one per controller).
  std::vector<std::string> cgroup_procs;
  std::vector<ResourceLimit> limits;
  bool no_new_privs = false;                  // PR_SET_NO_NEW_PRIVS
  std::optional<JobCredentials> credentials;  // setgroups({group} or {}), setresgid, setresuid
  // A descriptor the program inherits under the same number (every other one is closed); -1: none.
  int keep_fd = -1;
};

// Starts a child (CloneSharingMemory), calls setsid() in it (the child leads a new session and
// process group whose id is its pid), restores default signal handling and an empty signal mask,
// closes every other descriptor, applies the sandbox of `request` and execs. Returns the child's
// pid once exec succeeded; a failure in the child before exec (no such program, a uid switch that
// did not hold, ...) is returned as an error and the child is already reaped.
common::Result<pid_t> SpawnInNewSession(const SpawnRequest& request);

// Runs `child(arg)` in a new process that shares this one's memory until it execs or exits
// (clone with CLONE_VM | CLONE_VFORK, on a stack of its own; the calling thread waits meanwhile,
// the others go on), and returns its pid, or -1 with errno. Unlike fork() nothing of the
// caller's address space is copied, which in the agent (a large process with many threads)
// costs every start the copy of its page tables and, after it, a fault per page its threads
// write. `child` must call only async-signal-safe functions, write to no memory but its own
// stack, and end in exec or _exit; it starts with every signal blocked (the caller's handlers
// are still installed) and its own copy of the descriptor table and signal dispositions.
pid_t CloneSharingMemory(int (*child)(void*), void* arg);

// The end of a program's output file (SpawnRequest::output_path), for the error that says why
// it failed: its last 2,000 bytes on one line (line breaks and other control characters as
// spaces, trailing blanks dropped); "" when it cannot be read.
std::string OutputTail(const std::string& path);

}  // namespace agent
