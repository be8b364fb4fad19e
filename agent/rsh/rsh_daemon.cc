// A started daemon (rsh_bridge.h): its output relayed to the head's stream as it is written,
// its stop (SIGTERM to its tree, SIGKILL after the grace period), and its reaping once it has
// exited: what it left killed, its uid, GPUs, cgroup and record released, and its exit code
// handed to the stream.
#include "agent/rsh/rsh_bridge.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "agent/rsh/rsh_protocol.h"
#include "agent/sandbox/process_tree.h"
#include "common/log.h"

namespace agent {
namespace {

constexpr size_t kReadChunk = kMaxFramePayload;

}  // namespace

RemoteDaemon::~RemoteDaemon() {
  if (output_fd_ >= 0) ::close(output_fd_);
}

RemoteDaemon::Update RemoteDaemon::Next(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  Update u;
  while (true) {
    char buf[kReadChunk];
    ssize_t n = ::read(output_fd_, buf, sizeof buf);
    if (n > 0) {
      u.output.assign(buf, static_cast<size_t>(n));
      return u;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (exit_code_) {
      // Everything the daemon wrote was read before its exit was recorded? Read once more.
      lock.unlock();
      n = ::read(output_fd_, buf, sizeof buf);
      if (n > 0) {
        u.output.assign(buf, static_cast<size_t>(n));
        return u;
      }
      u.exit_code = exit_code_;
      return u;
    }
    if (std::chrono::steady_clock::now() >= deadline) return u;
    // Output is polled (a regular file has no readiness to wait for); an exit wakes at once.
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

void RemoteDaemon::Stop(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || exit_code_ || pid_ == 0) return;
  stopping_ = true;
  common::LogInfo("stopping job daemon", {{"job", std::to_string(job_id_)}, {"why", why}});
  killer_ = std::thread([this] { Kill(); });
}

void RemoteDaemon::Kill() {
  auto tree = JobTree(ListProcesses(), pid_, pid_);
  SignalAll(tree, SIGTERM);
  std::unique_lock<std::mutex> lock(mu_);
  if (changed_.wait_for(lock, grace_, [this] { return exit_code_.has_value(); })) return;
  lock.unlock();
  SignalAll(JobTree(ListProcesses(), pid_, pid_), SIGKILL);
  // What left the session dies in Reap (cgroup and uid sweep) once the daemon has exited.
}

void RshBridge::Reap(std::shared_ptr<RemoteDaemon> d, Started started) {
  const pid_t pid = d->pid_;
  siginfo_t info{};
  // WNOWAIT: the daemon stays a zombie, so its session id is not reused while its leftovers die.
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  for (int round = 0; round < 50; ++round) {
    auto left = JobTree(ListProcesses(), pid, 0);
    std::erase_if(left, [&](const ProcessId& p) { return p.pid == pid; });
    if (left.empty() || SignalAll(left, SIGKILL) == 0) break;
    ::usleep(20 * 1000);
  }
  if (started.cgroup) started.cgroup->KillAll();
  if (started.uid) KillAllOfUid(*started.uid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Nothing of it is left for its watcher or a restarted agent to stop.
  if (started.watcher) started.watcher->Release();
  records_.Remove(d->job_id_);
  logs_->Collect(d->job_id_, /*final=*/true);
  logs_->MarkFinished(d->job_id_);
  if (started.uid) {
    if (started.network) RevokeJobNetwork(options_.jobs, *started.uid);
    LockDir(JobDir(d->job_id_), uids_);
    LockDir(options_.jobs.CheckpointDir(d->job_id_), uids_);
    uids_->Release(*started.uid);
  }
  if (started.gpus) options_.gpus->Release(DaemonGpuHolder(d->job_id_));
  if (started.cgroup) {
    if (auto st = started.cgroup->Remove(); !st.ok()) {
      common::LogWarn("cannot remove the job daemon's cgroup",
                      {{"job", std::to_string(d->job_id_)}, {"error", st.message()}});
    }
  }
  const int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                       : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  common::LogInfo("job daemon ended",
                  {{"job", std::to_string(d->job_id_)}, {"exit_code", std::to_string(code)}});
  {
    std::lock_guard<std::mutex> lock(mu_);
    --live_;
  }
  std::lock_guard<std::mutex> lock(d->mu_);
  d->exit_code_ = code;
  d->changed_.notify_all();
}

}  // namespace agent
