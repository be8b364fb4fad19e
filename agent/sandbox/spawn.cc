#include "agent/sandbox/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/file_util.h"

namespace agent {

std::string OutputTail(const std::string& path) {
  auto text = common::ReadFile(path);
  if (!text.ok()) return "";
  std::string t = *text;
  if (t.size() > 2000) t = t.substr(t.size() - 2000);
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  for (char& c : t) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return t;
}
namespace {

// What the child was doing when it failed, sent back with errno over the close-on-exec pipe.
enum Step : int { kCgroup = 1, kRlimit, kNoNewPrivs, kCredentials, kCredentialsHeld, kCwd, kExec };

struct ChildError {
  int step = 0;
  int err = 0;
};

const char* StepName(int step) {
  switch (step) {
    case kCgroup: return "cannot join the job's cgroup";
    case kRlimit: return "cannot set rlimits";
    case kNoNewPrivs: return "cannot set no_new_privs";
    case kCredentials: return "cannot switch to the job's uid";
    case kCredentialsHeld: return "the job's uid switch did not hold";
    case kCwd: return "cannot enter the job directory";
    default: return "cannot execute";
  }
}

// Child side, after fork: async-signal-safe calls only. set*id go straight to the kernel: the
// child has one thread, and glibc's wrappers would try to reach the parent's other threads.
int DropPrivileges(const JobCredentials& c) {
  const gid_t wanted_group = c.group.value_or(0);
  const size_t wanted_groups = c.group ? 1 : 0;
  if (::syscall(SYS_setgroups, wanted_groups, c.group ? &wanted_group : nullptr) != 0) {
    return kCredentials;
  }
  if (::syscall(SYS_setresgid, c.gid, c.gid, c.gid) != 0) return kCredentials;
  if (::syscall(SYS_setresuid, c.uid, c.uid, c.uid) != 0) return kCredentials;
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0) return kCredentialsHeld;
  if (ru != c.uid || eu != c.uid || su != c.uid || rg != c.gid || eg != c.gid || sg != c.gid) {
    errno = EPERM;
    return kCredentialsHeld;
  }
  // Exactly the supplementary groups asked for: none, or the one group (the tenant's).
  gid_t groups[2] = {};
  int n = ::getgroups(2, groups);
  if (n != static_cast<int>(wanted_groups) || (wanted_groups == 1 && groups[0] != wanted_group)) {
    errno = EPERM;
    return kCredentialsHeld;
  }
  // With every id dropped, getting root (or other groups) back must be impossible.
  if (c.uid != 0 &&
      (::syscall(SYS_setresuid, 0, 0, 0) == 0 || ::syscall(SYS_setgroups, 0, nullptr) == 0)) {
    errno = EPERM;
    return kCredentialsHeld;
  }
  return 0;
}

int EnterSandbox(const SpawnRequest& r, const std::vector<ResourceLimit>& limits,
                 const std::vector<int>& cgroup_fds) {
  for (int fd : cgroup_fds) {
    if (::write(fd, "0", 1) != 1) return kCgroup;  // "0": the writing process itself
  }
  for (const auto& l : limits) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(l.value);
    if (::setrlimit(static_cast<__rlimit_resource_t>(l.resource), &rl) != 0) return kRlimit;
  }
  if (r.no_new_privs && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return kNoNewPrivs;
  if (r.credentials) {
    if (int step = DropPrivileges(*r.credentials); step != 0) return step;
  }
  return 0;
}

void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

// What SpawnChild needs, all made before the clone.
struct SpawnChildArgs {
  const SpawnRequest* request;
  const std::vector<ResourceLimit>* limits;
  const std::vector<int>* cgroup_fds;
  char* const* argv;
  char* const* envp;
  int devnull;
  int out;
  int err_pipe;  // write end, close-on-exec
};

// The child of SpawnInNewSession, on its own stack in the parent's memory
// (CloneSharingMemory): async-signal-safe calls only, no writes but to its own stack.
int SpawnChild(void* p) {
  const SpawnChildArgs& a = *static_cast<const SpawnChildArgs*>(p);
  const SpawnRequest& request = *a.request;
  ::setsid();
  // Default dispositions first, then the empty mask: no handler of the agent's can run here.
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(a.devnull, 0);
  ::dup2(a.out, 1);
  ::dup2(a.out, 2);
  // Descriptors the agent holds (sockets, files) must not leak into the job; the error pipe
  // and the cgroup files are already close-on-exec, so marking everything else close-on-exec
  // keeps them usable until exec.
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (request.keep_fd >= 0) ::fcntl(request.keep_fd, F_SETFD, 0);
  ChildError e;
  e.step = EnterSandbox(request, *a.limits, *a.cgroup_fds);
  if (e.step == 0 && !request.cwd.empty() && ::chdir(request.cwd.c_str()) != 0) e.step = kCwd;
  if (e.step == 0) {
    ::execvpe(a.argv[0], a.argv, a.envp);
    e.step = kExec;
  }
  e.err = errno;
  ssize_t ignored = ::write(a.err_pipe, &e, sizeof(e));
  (void)ignored;
  ::_exit(127);
}

}  // namespace

pid_t CloneSharingMemory(int (*child)(void*), void* arg) {
  // The child's stack: exec's path search and the sandbox's calls need a few KiB.
  constexpr size_t kStack = 256 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  // Every signal blocked across the clone: the child shares this memory and starts with this
  // thread's handlers, which must never run on its stack.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid =
      ::clone(child, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
  const int saved = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(stack, kStack);  // the child has exec'd or exited: its stack is free
  errno = saved;
  return pid;
}

common::Result<pid_t> SpawnInNewSession(const SpawnRequest& request) {
  if (request.argv.empty()) return common::InvalidArgument("empty argv");
  // Everything the child needs is prepared before the clone: the child, in this process's memory
  // beside its other threads, makes only async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // Limits only ever go down: one above what the agent itself may have becomes that.
  std::vector<ResourceLimit> limits = request.limits;
  for (auto& l : limits) {
    struct rlimit now;
    if (::getrlimit(static_cast<__rlimit_resource_t>(l.resource), &now) == 0 &&
        now.rlim_max != RLIM_INFINITY && static_cast<rlim_t>(l.value) > now.rlim_max) {
      l.value = static_cast<uint64_t>(now.rlim_max);
    }
  }

  std::vector<int> cgroup_fds;
  for (const auto& path : request.cgroup_procs) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      std::string err = std::strerror(errno);
      CloseAll(cgroup_fds);
      return common::Internal("open " + path + ": " + err);
    }
    cgroup_fds.push_back(fd);
  }
  int out = ::open(request.output_path.c_str(),
                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (out < 0) {
    std::string err = std::strerror(errno);
    CloseAll(cgroup_fds);
    return common::Internal("open " + request.output_path + ": " + err);
  }
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (devnull < 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::string err = std::strerror(errno);
    ::close(out);
    if (devnull >= 0) ::close(devnull);
    CloseAll(cgroup_fds);
    return common::Internal("pipe: " + err);
  }

  SpawnChildArgs args{&request,    &limits, &cgroup_fds, argv.data(),
                      envp.data(), devnull, out,         err_pipe[1]};
  pid_t pid = CloneSharingMemory(SpawnChild, &args);
  if (pid < 0) {
    std::string err = std::strerror(errno);
    ::close(out);
    ::close(devnull);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    CloseAll(cgroup_fds);
    return common::Internal("clone: " + err);
  }

  ::close(out);
  ::close(devnull);
  ::close(err_pipe[1]);
  CloseAll(cgroup_fds);
  ChildError child;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child, sizeof(child));
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(child))) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string what = StepName(child.step);
    if (child.step == kExec) what += " " + request.argv[0];
    return common::FailedPrecondition(what + ": " + std::strerror(child.err));
  }
  return pid;
}

}  // namespace agent
