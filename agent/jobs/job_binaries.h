// The executables a job's unprivileged uid runs (this agent as `exec-rank`, embody-engine,
// embody-data) must be reachable by that uid: every directory above each must let others pass,
// and the file let others execute. A build below a private directory (a clone in /root, mode
// 0700 on Debian) is not, so mpirun, as the job's uid, "could not access or execute" the agent.
// Such an executable is copied into a directory of the agent's that jobs reach (its data
// directory's bin/) and run from there.
//
// The same holds for the one file jobs read that the operator names, the CA file (agent_flags.h).
//
// Not here: which uids jobs run as (sandbox.h), the data directory's own modes (job_runner).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace agent {

// Whether a uid that is neither owner nor in the group of `path` or of any directory above it
// may execute `path` (every directory above: o+x; the file: o+x). A relative path is taken as
// found on PATH and not looked at: true.
bool OthersCanExecute(const std::string& path);

// `path` when others can execute it; otherwise a copy of it in `dir` (made 0755, itself reachable
// if its parents are), written atomically and named as `path` is, which is returned. A `path`
// that does not exist is returned unchanged: the job fails as it would have.
common::Result<std::string> ExecutableForJobs(const std::string& path, const std::string& dir);

// The same for a file jobs read, absolute `path`: itself when others can read it (o+r, and o+x on
// every directory above), else a copy in `dir` made 0644. An empty or missing `path` is returned
// unchanged.
common::Result<std::string> ReadableForJobs(const std::string& path, const std::string& dir);

// The Python SDK for jobs' PYTHONPATH: `dir` holds the package `embody/`. `dir` itself when others
// can read its files; else a copy of the package's files in `dest`/embody (dirs 0755, files 0644),
// and `dest` is returned. "" when `dir` holds no package.
common::Result<std::string> PythonPackageForJobs(const std::string& dir, const std::string& dest);

}  // namespace agent
