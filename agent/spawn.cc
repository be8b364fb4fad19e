#include "agent/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace agent {

common::Result<pid_t> SpawnInNewSession(const SpawnRequest& request) {
  if (request.argv.empty()) return common::InvalidArgument("empty argv");
  // Everything the child needs is prepared before fork: after fork in a threaded process only
  // async-signal-safe calls are allowed.
  std::vector<char*> argv;
  for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out = ::open(request.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) {
    return common::Internal("open " + request.output_path + ": " + std::strerror(errno));
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (devnull < 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::string err = std::strerror(errno);
    ::close(out);
    if (devnull >= 0) ::close(devnull);
    return common::Internal("pipe: " + err);
  }

  pid_t pid = ::fork();
  if (pid < 0) {
    std::string err = std::strerror(errno);
    ::close(out);
    ::close(devnull);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    return common::Internal("fork: " + err);
  }
  if (pid == 0) {
    ::setsid();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    ::dup2(devnull, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    // Descriptors the agent holds (sockets, files) must not leak into the job; the error pipe
    // is already close-on-exec, so marking everything else close-on-exec keeps it usable.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    int e = 0;
    if (!request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) {
      e = errno;
    } else {
      ::execvpe(argv[0], argv.data(), envp.data());
      e = errno;
    }
    ssize_t ignored = ::write(err_pipe[1], &e, sizeof(e));
    (void)ignored;
    ::_exit(127);
  }

  ::close(out);
  ::close(devnull);
  ::close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return common::FailedPrecondition("cannot execute " + request.argv[0] + ": " +
                                      std::strerror(child_errno));
  }
  return pid;
}

}  // namespace agent
