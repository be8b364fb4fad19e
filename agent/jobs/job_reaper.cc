#include "agent/jobs/job_reaper.h"

#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>

#include "agent/data/dataset_import.h"
#include "common/log.h"

namespace agent {
namespace {

// Live processes of `ids` together with everything still descending from them.
std::vector<ProcessId> WithDescendants(const std::vector<ProcessEntry>& table,
                                       const std::vector<ProcessId>& ids) {
  std::vector<ProcessId> out;
  std::set<pid_t> seen;
  for (const auto& id : ids) {
    if (!IsAlive(id)) continue;
    if (seen.insert(id.pid).second) out.push_back(id);
    for (const auto& d : JobTree(table, 0, id.pid)) {
      if (seen.insert(d.pid).second) out.push_back(d);
    }
  }
  return out;
}

// Below this much room for unprivileged writers, a file system counts as full: what a job that
// failed there saw was most likely ENOSPC (or EDQUOT), and its reason should say so.
constexpr uint64_t kFullBelowBytes = 256 * 1024;

// " (no space left on the file system of DIR)" for the first of `dirs` whose file system is
// full, else "".
std::string DiskFullNote(const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0) continue;
    const uint64_t room = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (room < kFullBelowBytes || (fs.f_files > 0 && fs.f_favail == 0)) {
      return " (no space left on the file system of " + dir + ")";
    }
  }
  return "";
}

}  // namespace

ExitDescription DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return {128 + sig, "killed by signal " + std::to_string(sig)};
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return {code, "exited with code " + std::to_string(code)};
}

ExitDescription JobReaper::Reap(
    HeldJob* job, const std::function<std::vector<ProcessId>()>& kill_snapshot) const {
  const std::string job_dir = options_.jobs.JobDir(job->id);
  const std::string log_dir = options_.jobs.LogDir(job->id);
  const std::string checkpoint_dir = options_.jobs.CheckpointDir(job->id);
  // WNOWAIT leaves mpirun a zombie: its pid, and so its session id, cannot be reused while the
  // leftovers of its tree are being killed.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(job->pid), &info, WEXITED | WNOWAIT) != 0 &&
         errno == EINTR) {
  }
  MarkPhase(*job, &job->timings.exited_ms);
  if (job->cgroup) {
    // Every process the job made is in its cgroup (none can leave it), so its member list is
    // the whole of what is left, read without a walk of /proc; rounds, since a process can fork
    // between the read and the signal. mpirun, a zombie now, is no longer listed.
    for (int round = 0; round < 50; ++round) {
      std::vector<pid_t> left = job->cgroup->Pids();
      std::erase(left, job->pid);
      if (left.empty()) break;
      for (pid_t p : left) ::kill(p, SIGKILL);
      ::usleep(20 * 1000);
    }
  } else {
    // What a kill found, some of which may have left the tree.
    const std::vector<ProcessId> snapshot = kill_snapshot();
    for (int round = 0; round < 50; ++round) {
      auto table = ListProcesses();
      auto left = JobTree(table, job->pid, 0);
      for (const auto& p : WithDescendants(table, snapshot)) left.push_back(p);
      std::erase_if(left, [&](const ProcessId& p) { return p.pid == job->pid; });
      if (left.empty() || SignalAll(left, SIGKILL) == 0) break;
      ::usleep(20 * 1000);
    }
  }
  // What left the tree (a daemon that double-forked) is still in the job's cgroup and still
  // runs as the job's uid. Only this waiter touches job->uid and job->cgroup while it runs.
  if (job->cgroup) job->cgroup->KillAll();
  if (job->uid) KillAllOfUid(*job->uid);
  int status = 0;
  while (::waitpid(job->pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Nothing of the job is left for the watcher to stop.
  if (job->watcher) job->watcher->Release();
  bool memory_limit_hit = job->cgroup && job->cgroup->MemoryLimitHit();
  logs_->Collect(job->id, /*final=*/true);
  logs_->MarkFinished(job->id);
  // A full disk under the job's checkpoints, its directory or its logs: said in its reason, the
  // one place a user looks first (the job's own message may be in the log that could not be
  // written).
  const std::string full_note = DiskFullNote({checkpoint_dir, job_dir, log_dir});
  std::string log_note;
  if (std::string err = logs_->WriteError(job->id); !err.empty()) {
    log_note = " (its log is incomplete: " + err + ")";
  }
  // The finished job's directories are nobody's until its next attempt: the next job given the
  // same uid finds nothing.
  if (job->uid) {
    LockDir(job_dir, &uids_);
    LockDir(checkpoint_dir, &uids_);
  }
  {
    std::error_code ec;
    std::filesystem::remove_all(options_.jobs.DownloadDir(job->id), ec);  // the server has it
  }

  ExitDescription d = DescribeWaitStatus(status);
  if (memory_limit_hit) {
    d.reason += " (memory limit of " + std::to_string(job->memory_limit_bytes) + " bytes reached)";
  }
  if (d.exit_code != 0) d.reason += full_note;
  d.reason += log_note;
  if (job->import) {
    // Every process of the job's uid is gone: its output can no longer change under us.
    if (d.exit_code == 0 && !job->kill_requested) {
      if (common::Status st = PublishImport(*job->import); !st.ok()) {
        DiscardImport(*job->import);
        d = {1, "cannot publish the dataset: " + st.message()};
      }
    } else {
      DiscardImport(*job->import);
    }
  }
  return d;
}

std::vector<ProcessId> JobReaper::Tree(const HeldJob& job) {
  return JobTree(ListProcesses(), job.pid, job.pid);
}

void JobReaper::Terminate(const HeldJob& job, const std::vector<ProcessId>& tree) const {
  common::LogInfo("killing job",
                  {{"job", std::to_string(job.id)}, {"processes", std::to_string(tree.size())}});
  // The ranks get SIGTERM, mpirun does not: signalled, mpirun aborts the job and SIGKILLs the
  // ranks a second later (odls_base_sigkill_timeout), before a rank that is writing its
  // checkpoint (the engine's answer to SIGTERM) has finished. Left alone, it exits with them.
  std::vector<ProcessId> ranks;
  for (const ProcessId& p : tree) {
    if (p.pid != job.pid) ranks.push_back(p);
  }
  SignalAll(ranks.empty() ? tree : ranks, SIGTERM);
}

void JobReaper::KillSurvivors(const HeldJob& job, const std::vector<ProcessId>& tree) const {
  auto table = ListProcesses();
  auto all = JobTree(table, job.pid, job.pid);
  for (const auto& p : WithDescendants(table, tree)) {
    if (std::find(all.begin(), all.end(), p) == all.end()) all.push_back(p);
  }
  common::LogWarn("job survived SIGTERM; sending SIGKILL",
                  {{"job", std::to_string(job.id)}, {"processes", std::to_string(all.size())}});
  SignalAll(all, SIGKILL);
}

}  // namespace agent
