#include "agent/jobs/job_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include <CLI/CLI.hpp>

#include "agent/sandbox/spawn.h"
#include "common/log.h"
#include "common/parse_int.h"

namespace agent {
namespace {

constexpr char kReleased = 'd';

}  // namespace

common::Result<std::unique_ptr<JobWatcher>> JobWatcher::Start(const std::string& agent_binary,
                                                              const std::string& log_path,
                                                              const JobProcesses& p,
                                                              std::chrono::milliseconds grace,
                                                              std::chrono::milliseconds kill_grace) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return common::Internal(std::string("pipe: ") + std::strerror(errno));
  }
  SpawnRequest req;
  req.argv = {agent_binary,
              "watch-job",
              "--agent-fd",
              std::to_string(fds[0]),
              "--grace-ms",
              std::to_string(grace.count()),
              "--kill-grace-ms",
              std::to_string(kill_grace.count()),
              "--job",
              ToJson(p).dump()};
  req.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  req.cwd = "/";
  req.output_path = log_path;
  req.keep_fd = fds[0];
  auto pid = SpawnInNewSession(req);
  ::close(fds[0]);
  if (!pid.ok()) {
    ::close(fds[1]);
    return pid.status();
  }
  ProcessId id = ProcessIdOf(*pid);
  id.pid = *pid;  // reaped by Release() whatever /proc said
  return std::unique_ptr<JobWatcher>(new JobWatcher(id, fds[1]));
}

JobWatcher::~JobWatcher() { Release(); }

void JobWatcher::Release() {
  if (fd_ < 0) return;
  ssize_t ignored = ::write(fd_, &kReleased, 1);
  (void)ignored;
  ::close(fd_);
  fd_ = -1;
  while (::waitpid(id_.pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

int WatchJobMain(const std::vector<std::string>& args) {
  std::string fd_text, grace_text, kill_grace_text, job_text;
  CLI::App app("embody-agent watch-job: stop a job's processes when its agent is gone",
               "embody-agent watch-job");
  app.add_option("--agent-fd", fd_text, "read end of the agent's pipe")->required();
  app.add_option("--grace-ms", grace_text, "how long the job outlives its agent")->required();
  app.add_option("--kill-grace-ms", kill_grace_text, "SIGTERM to SIGKILL")->required();
  app.add_option("--job", job_text, "the job's processes, JSON")->required();
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "embody-agent watch-job: %s\n", e.what());
    return 2;
  }
  auto fd = common::ParseInt(fd_text, 0, 1 << 20, "--agent-fd");
  auto grace = common::ParseInt(grace_text, 0, 24 * 3600 * 1000, "--grace-ms");
  auto kill_grace = common::ParseInt(kill_grace_text, 0, 3600 * 1000, "--kill-grace-ms");
  auto job = ParseJobProcesses(nlohmann::json::parse(job_text, nullptr, false));
  if (!fd.ok() || !grace.ok() || !kill_grace.ok() || !job.ok()) {
    std::fprintf(stderr, "embody-agent watch-job: bad arguments\n");
    return 2;
  }
  // The agent's own signals (a terminal's ^C, a stop of its process group) are not for us.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  for (;;) {
    char c = 0;
    ssize_t n = ::read(*fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n == 1 && c == kReleased) return 0;
    if (n == 1) continue;
    break;  // EOF (or an error): the agent process is gone
  }
  common::InitLog("watch-job", common::LogLevel::kInfo);
  std::this_thread::sleep_for(std::chrono::milliseconds(*grace));
  int stopped = StopJobProcesses(*job, std::chrono::milliseconds(*kill_grace));
  common::LogWarn("agent gone: stopped the job's processes",
                  {{"job", std::to_string(job->job_id)}, {"processes", std::to_string(stopped)}});
  return 0;
}

}  // namespace agent
