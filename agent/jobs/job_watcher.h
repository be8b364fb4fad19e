// The job watcher: one small root process per running job, `embody-agent watch-job`, which stops
// the job's processes when the agent that started them is gone, so that a job never runs on
// outside its agent's control (after a kill -9 or a crash of the agent, the server restarts the
// job elsewhere, and a second copy must not train beside it).
//
// The agent keeps the write end of a pipe whose read end is the watcher's only tie to it. The
// write end is close-on-exec, so no job inherits it: it closes exactly when the agent process
// ends, however it ends. Then the watcher waits `grace`, and stops the job
// (agent/sandbox/job_processes.h: SIGTERM, then SIGKILL after `kill_grace`, the cgroup removed). A
// watcher is not a child of the job (it outlives mpirun and ranks that exec other programs), not
// in the job's session, cgroup or uid (the job cannot signal it), and in a session of its own (a
// signal to the agent's process group does not reach it).
//
// A restarted agent does not adopt the jobs of the agent it replaces: it cannot wait for processes
// that are not its children nor resume their logs where they were. Within the grace it stops them
// itself at once and reports them lost (agent/jobs/job_record.h), and the server restarts them; the
// grace only bounds how long a job outlives an agent that does not come back.
//
// When the job ends under the agent's control, Release() tells the watcher to exit without
// touching anything ('d' on the pipe, then EOF).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/sandbox/job_processes.h"
#include "common/status.h"

namespace agent {

class JobWatcher {
 public:
  // Starts `agent_binary watch-job ...` for the job's processes `p`; what it says goes to
  // `log_path` (appended).
  static common::Result<std::unique_ptr<JobWatcher>> Start(const std::string& agent_binary,
                                                           const std::string& log_path,
                                                           const JobProcesses& p,
                                                           std::chrono::milliseconds grace,
                                                           std::chrono::milliseconds kill_grace);
  ~JobWatcher();  // Release()
  JobWatcher(const JobWatcher&) = delete;
  JobWatcher& operator=(const JobWatcher&) = delete;

  // Tells the watcher to exit without stopping anything, and reaps it. Idempotent.
  void Release();
  const ProcessId& id() const { return id_; }

 private:
  JobWatcher(ProcessId id, int fd) : id_(id), fd_(fd) {}
  ProcessId id_;
  int fd_ = -1;
};

// `embody-agent watch-job --agent-fd N --grace-ms MS --kill-grace-ms MS --job JSON`; `args`
// excludes "watch-job". JSON is the job's processes (ToJson(JobProcesses)). Returns the exit
// code: 0 when released or after stopping the job, 2 for a bad command line.
int WatchJobMain(const std::vector<std::string>& args);

}  // namespace agent
