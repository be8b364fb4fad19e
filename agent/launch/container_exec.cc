#include "agent/launch/container_exec.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "api/launch_env.h"
#include "common/file_util.h"

extern char** environ;

namespace agent {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool WriteProcFile(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

}  // namespace

std::string ExecInContainer(const ContainerPlan& plan, const std::vector<std::string>& argv) {
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] != '/') return "no HOME (the job directory) for the bundle";
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* job = std::getenv(api::kEnvJobId);
  const std::string id = std::string("embody-job") + (job != nullptr ? job : "") + "-rank" +
                         (rank != nullptr ? rank : "0") + "-" + std::to_string(::getpid());
  const std::string bundle = std::string(home) + "/.containers/" + id;
  if (auto st = common::MakeDirs(bundle); !st.ok()) return st.message();
  ::chmod((std::string(home) + "/.containers").c_str(), 0700);

  ContainerProcess process;
  process.args = argv;
  std::vector<std::string> own;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) own.push_back(*e);
  process.env = MergeImageEnvironment(plan.image.env, own);
  process.uid = ::getuid();
  process.gid = ::getgid();
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) process.hostname = host;
  char cwd[4096] = {};
  process.cwd = ContainerWorkingDir(plan, ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "", home);
  const std::string config = OciRuntimeConfig(plan, process).dump(1) + "\n";
  if (auto st = common::WriteFileAtomic(bundle + "/config.json", config, 0600); !st.ok()) {
    return st.message();
  }

  // A user and mount namespace of this process's own, mapping its uid and gid to themselves,
  // only to cover /sys/fs/cgroup from crun's sight (see the header). A process that switched
  // uid without an exec since is not dumpable, and its /proc/self files are root's: it could not
  // write its own maps.
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    return Errno("cannot make a user namespace for crun (are unprivileged user namespaces "
                 "enabled? user.max_user_namespaces)");
  }
  const std::string uid = std::to_string(process.uid), gid = std::to_string(process.gid);
  if (!WriteProcFile("/proc/self/setgroups", "deny") ||
      !WriteProcFile("/proc/self/uid_map", uid + " " + uid + " 1") ||
      !WriteProcFile("/proc/self/gid_map", gid + " " + gid + " 1")) {
    return Errno("cannot map the job's uid in its user namespace");
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Errno("cannot make the mount namespace private");
  }
  // Covered where crun would refuse what it finds: a hybrid layout, or no cgroup file system
  // at all (a sysfs without the cgroup mount, as `ip netns exec` gives its command).
  struct stat st {};
  struct statfs fs {};
  const bool no_cgroup_fs = ::statfs("/sys/fs/cgroup", &fs) == 0 &&
                            fs.f_type != CGROUP2_SUPER_MAGIC && fs.f_type != TMPFS_MAGIC;
  if (no_cgroup_fs || ::stat("/sys/fs/cgroup/unified", &st) == 0) {
    if (::mount("tmpfs", "/sys/fs/cgroup", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "mode=755,size=4k") != 0) {
      return Errno("cannot cover /sys/fs/cgroup for crun");
    }
  }
  std::vector<std::string> args{plan.crun, "--root", bundle + "/state",
                                "--cgroup-manager=disabled", "run", "--bundle", bundle, id};
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  return Errno("cannot execute " + plan.crun);
}

}  // namespace agent
