// embody-container-init: PID 1 of an image job's container (agent/launch/container_config.h). Runs
// `embody-container-init -- PROGRAM ARGS...` as its one child, passes it SIGTERM, SIGINT, SIGHUP,
// SIGQUIT, SIGUSR1 and SIGUSR2 (a PID 1 ignores signals it has no handler for, so the job's
// command, not this, must get them), reaps every process that ends in the container, and exits
// as the child did (128+N when signal N killed it). Built static: the image has no libraries of
// ours.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  int first = 1;
  if (argc > 1 && std::strcmp(argv[1], "--") == 0) first = 2;
  if (first >= argc) {
    std::fprintf(stderr, "usage: embody-container-init -- PROGRAM [ARGS...]\n");
    return 2;
  }
  const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  sigset_t all, old;
  sigemptyset(&all);
  for (int s : forwarded) sigaddset(&all, s);
  sigaddset(&all, SIGCHLD);
  sigprocmask(SIG_BLOCK, &all, &old);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("embody-container-init: fork");
    return 1;
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvp(argv[first], argv + first);
    std::fprintf(stderr, "embody-container-init: cannot execute %s: %s\n", argv[first],
                 std::strerror(errno));
    _exit(127);
  }
  int code = 1;
  for (;;) {
    int sig = 0;
    if (sigwait(&all, &sig) != 0) continue;
    if (sig != SIGCHLD) {
      kill(child, sig);
      continue;
    }
    for (;;) {  // reap everything that ended: the child, and orphans it left to PID 1
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid != child) continue;
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return code;
    }
  }
}
