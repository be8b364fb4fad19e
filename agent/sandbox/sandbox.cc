#include "agent/sandbox/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "agent/sandbox/spawn.h"
#include "agent/sandbox/uid_scrub.h"
#include "common/file_util.h"
#include "common/log.h"

namespace agent {
namespace {

constexpr int kMaxTreeDepth = 64;

// What a short-lived child does after switching to a job's credentials.
enum class AsJob { kNothing, kAccess, kKillAll };

struct AsJobArgs {
  const JobCredentials* c;
  AsJob op;
  const char* path;
  int mode;
};

// The child of RunAsJob (CloneSharingMemory): raw set*id syscalls, as glibc's wrappers would
// try to reach the parent's other threads.
int AsJobChild(void* p) {
  const AsJobArgs& a = *static_cast<const AsJobArgs*>(p);
  const JobCredentials& c = *a.c;
  const gid_t group = c.group.value_or(0);
  if (::syscall(SYS_setgroups, c.group ? 1 : 0, c.group ? &group : nullptr) != 0 ||
      ::syscall(SYS_setresgid, c.gid, c.gid, c.gid) != 0 ||
      ::syscall(SYS_setresuid, c.uid, c.uid, c.uid) != 0) {
    ::_exit(2);
  }
  switch (a.op) {
    case AsJob::kAccess:
      ::_exit(::access(a.path, a.mode) == 0 ? 0 : 1);
    case AsJob::kKillAll:
      ::_exit(::kill(-1, SIGKILL) == 0 || errno == ESRCH ? 0 : 1);
    default:
      ::_exit(0);
  }
}

// Starts a child that drops to `c` and does `op`; returns its exit code, or -1.
int RunAsJob(const JobCredentials& c, AsJob op, const char* path = nullptr, int mode = 0) {
  AsJobArgs args{&c, op, path, mode};
  const pid_t pid = CloneSharingMemory(AsJobChild, &args);
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

common::Status SetMode(const std::string& path, mode_t mode) {
  if (::chmod(path.c_str(), mode) != 0) {
    return common::Internal("chmod " + path + ": " + std::strerror(errno));
  }
  return common::Status::Ok();
}

void AdoptEntries(int dir_fd, const JobCredentials& owner, const UidPool& pool, int depth) {
  if (depth > kMaxTreeDepth) return;
  int list_fd = ::dup(dir_fd);
  DIR* d = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
  if (d == nullptr) {
    if (list_fd >= 0) ::close(list_fd);
    return;
  }
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!pool.InRange(st.st_uid)) continue;
    if (S_ISDIR(st.st_mode)) {
      int sub = ::openat(dir_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      if (::fchown(sub, owner.uid, owner.gid) == 0) AdoptEntries(sub, owner, pool, depth + 1);
      ::close(sub);
    } else if (S_ISREG(st.st_mode) && st.st_nlink == 1) {
      ::fchownat(dir_fd, e->d_name, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW);
    }
  }
  ::closedir(d);
}

}  // namespace

std::vector<ResourceLimit> JobRlimits(const SandboxOptions& options) {
  std::vector<ResourceLimit> out = {
      {RLIMIT_CORE, 0},
      {RLIMIT_NOFILE, static_cast<uint64_t>(options.max_open_files)},
  };
  // Counted per real uid: only meaningful when the uid is the job's alone.
  if (options.switch_uid) out.push_back({RLIMIT_NPROC, static_cast<uint64_t>(options.max_processes)});
  return out;
}

common::Result<gid_t> TenantGid(const SandboxOptions& options, int64_t tenant_id) {
  if (tenant_id <= 0) {
    return common::InvalidArgument("a job without a tenant id cannot be given its tenant's group");
  }
  if (tenant_id >= options.tenant_gid_count) {
    return common::FailedPrecondition(
        "tenant " + std::to_string(tenant_id) + " has no group on this node: --tenant-gid-base " +
        std::to_string(options.tenant_gid_base) + " --tenant-gid-count " +
        std::to_string(options.tenant_gid_count) + " give tenants 1.." +
        std::to_string(options.tenant_gid_count - 1) +
        " theirs; raise --tenant-gid-count (the same on every node)");
  }
  return options.tenant_gid_base + static_cast<gid_t>(tenant_id);
}

UidPool::UidPool(const SandboxOptions& options)
    : base_(options.uid_base), count_(std::max(1, options.uid_count)) {}

bool UidPool::InRange(uid_t uid) const {
  return uid >= base_ && uid - base_ < static_cast<uid_t>(count_);
}

common::Result<uid_t> UidPool::Acquire(int64_t job_id) {
  std::set<uid_t> busy = ProcessUids();
  std::lock_guard<std::mutex> lock(mu_);
  int64_t first = job_id % count_;
  if (first < 0) first += count_;
  for (int i = 0; i < count_; ++i) {
    uid_t uid = base_ + static_cast<uid_t>((first + i) % count_);
    if (held_.count(uid) || busy.count(uid)) continue;
    held_.insert(uid);
    return uid;
  }
  return common::Unavailable("every job uid in [" + std::to_string(base_) + ", " +
                             std::to_string(base_ + count_) + ") is in use");
}

UidPool::~UidPool() {
  std::thread scrubber;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    scrubber = std::move(scrubber_);
  }
  changed_.notify_all();
  if (scrubber.joinable()) scrubber.join();  // it scrubs what is queued first
}

void UidPool::Release(uid_t uid) {
  std::thread finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!scrub_enabled_) {
      held_.erase(uid);
      return;
    }
    to_scrub_.insert(uid);
    if (!scrubber_running_ && !stop_) {
      // The scrubber runs only while there is work: an idle agent holds no thread for it.
      finished = std::move(scrubber_);
      scrubber_running_ = true;
      scrubber_ = std::thread([this] { ScrubLoop(); });
    }
  }
  if (finished.joinable()) finished.join();  // it ran out of work and has returned
  changed_.notify_all();
}

void UidPool::ScrubBeforeReuse(const std::vector<std::string>& roots,
                               const std::vector<std::string>& keep) {
  std::lock_guard<std::mutex> lock(mu_);
  scrub_roots_.insert(scrub_roots_.end(), roots.begin(), roots.end());
  scrub_keep_.insert(scrub_keep_.end(), keep.begin(), keep.end());
  scrub_enabled_ = true;
}

void UidPool::WaitScrubbed() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return to_scrub_.empty() && scrubbing_ == 0; });
}

void UidPool::ScrubLoop() {
  // A walk costs the same for one uid as for many: during a burst of short jobs, walks are at
  // least kMinWalkInterval apart and take every uid released meanwhile.
  constexpr auto kMinWalkInterval = std::chrono::milliseconds(200);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait_until(lock, next_walk_, [&] { return stop_; });
    if (to_scrub_.empty()) {
      scrubber_running_ = false;  // Release starts another when there is work again
      return;
    }
    std::set<uid_t> batch;
    batch.swap(to_scrub_);
    scrubbing_ = static_cast<int>(batch.size());
    const auto roots = scrub_roots_;
    const auto keep = scrub_keep_;
    lock.unlock();
    ScrubReport r = ScrubUids(batch, roots, /*system_v=*/true, keep);
    if (r.removed > 0 || r.errors > 0) {
      std::string uids;
      for (uid_t u : batch) uids += (uids.empty() ? "" : ",") + std::to_string(u);
      common::LogInfo("removed what finished jobs left in shared scratch places",
                      {{"uids", uids},
                       {"removed", std::to_string(r.removed)},
                       {"kept_as_root", std::to_string(r.given_to_root)},
                       {"errors", std::to_string(r.errors)}});
    }
    lock.lock();
    next_walk_ = std::chrono::steady_clock::now() + kMinWalkInterval;
    for (uid_t u : batch) held_.erase(u);
    scrubbing_ = 0;
    changed_.notify_all();
  }
}

std::set<uid_t> ProcessUids() {
  std::set<uid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    struct stat st;
    if (::fstatat(::dirfd(d), e->d_name, &st, 0) != 0) continue;
    // A zombie (state Z, after the command in /proc/PID/stat) runs nothing any more.
    auto stat = common::ReadFile(std::string("/proc/") + e->d_name + "/stat");
    if (!stat.ok()) continue;
    size_t paren = stat->rfind(')');
    if (paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] == 'Z') continue;
    out.insert(st.st_uid);
  }
  ::closedir(d);
  return out;
}

common::Status PrepareDataDir(const std::string& data_dir, bool switch_uid) {
  namespace fs = std::filesystem;
  const mode_t pass = switch_uid ? 0711 : 0700;
  for (const auto& [sub, mode] : std::vector<std::pair<std::string, mode_t>>{
           {"", pass}, {"/jobs", pass}, {"/checkpoints", pass}, {"/downloads", pass},
           {"/logs", 0700}}) {
    std::string dir = data_dir + sub;
    EMBODY_RETURN_IF_ERROR(common::MakeDirs(dir));
    EMBODY_RETURN_IF_ERROR(SetMode(dir, mode));
  }
  if (!switch_uid) return common::Status::Ok();
  // Other agents of this machine, which may hand out the same job uids, keep out of it when
  // they scrub a uid (uid_scrub.h).
  EMBODY_RETURN_IF_ERROR(
      common::WriteFileAtomic(data_dir + "/" + kAgentDataMarker, "embody agent data\n", 0644));
  for (fs::path p = fs::path(data_dir).parent_path(); !p.empty(); p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) {
      return common::Internal("stat " + p.string() + ": " + std::strerror(errno));
    }
    if ((st.st_mode & S_IXOTH) == 0) {
      return common::FailedPrecondition(
          "job uids cannot reach --data-dir " + data_dir + ": " + p.string() +
          " is not searchable by others (chmod o+x it, or give another --data-dir)");
    }
    if (p == p.root_path()) break;
  }
  // Directories of jobs an earlier agent ran: nobody's until a job of that id runs here again.
  for (const char* sub : {"/jobs", "/checkpoints"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(data_dir + sub, ec)) LockDir(e.path().string());
  }
  return common::Status::Ok();
}

common::Status MakePrivateDir(const std::string& path, const std::optional<JobCredentials>& owner) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return common::Internal("remove " + path + ": " + ec.message());
  if (::mkdir(path.c_str(), 0700) != 0) {
    return common::Internal("mkdir " + path + ": " + std::strerror(errno));
  }
  if (owner && ::chown(path.c_str(), owner->uid, owner->gid) != 0) {
    return common::Internal("chown " + path + ": " + std::strerror(errno));
  }
  return common::Status::Ok();
}

common::Status WriteLaunchFile(const std::string& path, const std::string& contents, int mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return common::Internal("create " + path + ": " + std::strerror(errno));
  // The mode exactly, whatever the umask.
  common::Status st;
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) {
    st = common::Internal("chmod " + path + ": " + std::strerror(errno));
  }
  for (size_t done = 0; st.ok() && done < contents.size();) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      st = common::Internal("write " + path + ": " + std::strerror(errno));
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && st.ok()) {
    st = common::Internal("close " + path + ": " + std::strerror(errno));
  }
  return st;
}

common::Status AdoptTree(const std::string& path, const JobCredentials& owner,
                         const UidPool& pool) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return common::Internal("open " + path + ": " + std::strerror(errno));
  common::Status st;
  if (::fchown(fd, owner.uid, owner.gid) != 0 || ::fchmod(fd, 0700) != 0) {
    st = common::Internal("chown " + path + ": " + std::strerror(errno));
  } else {
    AdoptEntries(fd, owner, pool, 0);
  }
  ::close(fd);
  return st;
}

void LockDir(const std::string& path, const UidPool* pool) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  if (::fchown(fd, ::geteuid(), ::getegid()) != 0 || ::fchmod(fd, 0700) != 0) {
    common::LogWarn("cannot lock a job directory", {{"dir", path}, {"error", std::strerror(errno)}});
  } else if (pool != nullptr) {
    AdoptEntries(fd, {::geteuid(), ::getegid()}, *pool, 0);
  }
  ::close(fd);
}

bool CanReadAs(const JobCredentials& creds, const std::string& path, bool dir) {
  return RunAsJob(creds, AsJob::kAccess, path.c_str(), R_OK | (dir ? X_OK : 0)) == 0;
}

bool CanExecuteAs(const std::optional<JobCredentials>& creds, const std::string& path) {
  if (!creds) return ::access(path.c_str(), R_OK | X_OK) == 0;
  return RunAsJob(*creds, AsJob::kAccess, path.c_str(), R_OK | X_OK) == 0;
}

common::Status CheckVirtualenvFor(const std::optional<JobCredentials>& creds,
                                  const std::string& venv) {
  const std::string python = venv + "/bin/python3";
  struct stat st {};
  if (::stat(python.c_str(), &st) != 0 && errno == ENOENT) {
    const std::string make = "python3 -m venv " + venv;
    return common::InvalidArgument("environment.python: " + python +
                                   " does not exist on this node (make it there: " + make + ")");
  }
  // stat as the agent, then access(2) as the job: a directory named python3 is executable too.
  const bool is_file = ::stat(python.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  if (!is_file || !CanExecuteAs(creds, python)) {
    return common::InvalidArgument(
        "environment.python: " + python + " is not a file the job's uid" +
        (creds ? " (" + std::to_string(creds->uid) + ")" : "") +
        " can read and execute (it and every directory above it must be open to that uid, "
        "e.g. chmod o+rx, or through the tenant's group)");
  }
  return common::Status::Ok();
}

bool CanSwitchTo(const JobCredentials& creds) { return RunAsJob(creds, AsJob::kNothing) == 0; }

void KillAllOfUid(uid_t uid) {
  if (uid == 0 || uid == ::geteuid()) return;  // never the agent's own processes
  RunAsJob({uid, static_cast<gid_t>(uid)}, AsJob::kKillAll);
}

api::NodeIsolation DescribeIsolation(bool switch_uid, CgroupVersion cgroups) {
  api::NodeIsolation iso;
  iso.unprivileged_uid = switch_uid;
  iso.cgroup = CgroupVersionName(cgroups);
  iso.rlimits = true;
  return iso;
}

}  // namespace agent
