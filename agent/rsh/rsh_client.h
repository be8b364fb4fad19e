// `embody-agent rsh --hosts FILE [--ca-file CA] HOST WORD...`: Open MPI's remote launcher
// (plm_rsh_agent) for a job whose ranks span nodes (docs/multinode.md). mpirun runs it, as the
// job's uid on the head node, once per other node; it asks HOST's agent (its URL from FILE,
// written by the head agent; an https URL is verified against CA, the head agent's --ca-file) to
// start the daemon command WORD... for the job (EMBODY_JOB_ID, authenticated with
// EMBODY_JOB_TOKEN, both in mpirun's environment), copies the daemon's output to its stdout and
// exits with the daemon's exit status, as ssh would.
//
// Signals: mpirun ends its launchers with a signal when it aborts. This process keeps the
// default dispositions, so SIGTERM, SIGINT or SIGKILL ends it and closes the stream, and the
// stream's end is what stops the daemon on the other node (SIGTERM to its tree, SIGKILL after
// the agent's grace period). Exit 255, ssh's code for its own failures, when the agent cannot be
// reached, refuses the request, or the stream breaks before the daemon's exit arrived.
#pragma once

#include <string>
#include <vector>

namespace agent {

// `args` excludes "rsh". Returns the process exit code.
int RshMain(const std::vector<std::string>& args);

}  // namespace agent
