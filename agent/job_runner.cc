#include "agent/job_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "agent/mpi_launch.h"
#include "agent/spawn.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "common/log.h"

extern char** environ;

namespace agent {
namespace {

constexpr size_t kRememberAcknowledged = 1024;

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

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

}  // namespace

ExitDescription DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return {128 + sig, "killed by signal " + std::to_string(sig)};
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return {code, "exited with code " + std::to_string(code)};
}

JobRunner::JobRunner(JobRunnerOptions options, RankLogs* logs)
    : options_(std::move(options)), logs_(logs) {}

JobRunner::~JobRunner() {
  KillAllAndWait("agent shutting down");
  std::map<int64_t, std::unique_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs.swap(jobs_);
  }
  for (auto& [id, job] : jobs) JoinThreads(job.get());
}

void JobRunner::SetOnFinish(std::function<void(int64_t)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_finish_ = std::move(fn);
}

void JobRunner::Launch(const api::Command& launch) {
  std::unique_lock<std::mutex> lock(mu_);
  if (jobs_.count(launch.job_id)) {
    // A repeated launch (the reply that carried it was lost, or the server does not know yet that
    // the previous attempt ended): the job is already handled here.
    common::LogWarn("ignoring launch of a job this node already has",
                    {{"job", std::to_string(launch.job_id)}});
    return;
  }
  auto job = std::make_unique<Job>();
  job->id = launch.job_id;
  job->attempt = launch.attempt;
  job->tenant = launch.tenant;
  Job* j = job.get();
  jobs_[launch.job_id] = std::move(job);
  std::erase(recently_acknowledged_, launch.job_id);
  Start(j, launch);
}

// mu_ held. Prepares the job directory and starts mpirun, or records why it could not.
void JobRunner::Start(Job* job, const api::Command& launch) {
  std::string id = std::to_string(job->id);
  LaunchInput in;
  in.job_id = job->id;
  in.spec = launch.spec;
  in.hosts = launch.hosts;
  in.local_address = options_.address;
  in.job_dir = options_.data_dir + "/jobs/job-" + id;
  in.checkpoint_dir = options_.data_dir + "/checkpoints/job-" + id;
  in.mpirun = options_.mpirun;
  in.engine = options_.engine;
  in.agent_url = options_.agent_url;
  in.job_token = common::RandomToken();
  in.as_root = options_.as_root;
  // Checkpoints live on the disk of the node that wrote them: resume only where this node can
  // read them (the file, or its directory when the run has since written newer ones and pruned
  // it; the engine then takes the newest), and say in the launcher log which way it starts.
  std::string start_note;
  if (!launch.resume_from.empty()) {
    const std::string dir = std::filesystem::path(launch.resume_from).parent_path().string();
    if (::access(launch.resume_from.c_str(), R_OK) == 0 ||
        (!dir.empty() && ::access(dir.c_str(), R_OK | X_OK) == 0)) {
      in.resume_from = launch.resume_from;
      start_note = "embody-agent: resuming from " + launch.resume_from + "\n";
    } else {
      start_note = "embody-agent: checkpoint " + launch.resume_from +
                   " is not readable on this node; starting from step 0\n";
      common::LogWarn("checkpoint not readable here, starting from step 0",
                      {{"job", id}, {"checkpoint", launch.resume_from}});
    }
  }

  auto plan = BuildLaunchPlan(in);
  if (!plan.ok()) return Finish(job, 1, plan.status().message());

  // A new attempt starts from an empty job directory: its logs restart at offset 0.
  std::error_code ec;
  std::filesystem::remove_all(in.job_dir, ec);
  common::Status st = common::MakeDirs(plan->ranks_dir);
  if (st.ok()) st = common::MakeDirs(in.checkpoint_dir);
  if (st.ok()) st = common::WriteFileAtomic(in.job_dir + "/spec.json", launch.spec.dump(2) + "\n");
  if (st.ok()) st = common::WriteFileAtomic(plan->hostfile_path, plan->hostfile);
  // The launcher log is opened for appending by the spawn below, after this note.
  if (st.ok() && !start_note.empty()) {
    st = common::WriteFileAtomic(RankLogs::RankLogPath(in.job_dir, -1), start_note);
  }
  if (!st.ok()) return Finish(job, 1, "cannot prepare job directory: " + st.message());

  logs_->AddJob(job->id, in.job_dir);
  SpawnRequest req;
  req.argv = plan->argv;
  req.env = MergeEnvironment(CurrentEnvironment(), plan->env);
  req.cwd = in.job_dir;
  req.output_path = RankLogs::RankLogPath(in.job_dir, -1);
  auto pid = SpawnInNewSession(req);
  if (!pid.ok()) {
    logs_->Collect(job->id, /*final=*/true);
    logs_->MarkFinished(job->id);
    return Finish(job, 127, pid.status().message());
  }
  job->pid = *pid;
  job->token = in.job_token;
  job->running = true;
  common::LogInfo("job launched", {{"job", id},
                                   {"attempt", std::to_string(job->attempt)},
                                   {"pid", std::to_string(job->pid)},
                                   {"ranks", std::to_string(plan->total_ranks)}});
  job->waiter = std::thread([this, job] { Wait(job); });
}

void JobRunner::Finish(Job* job, int exit_code, const std::string& reason) {
  job->running = false;
  job->result = {job->id, exit_code, reason};
  common::LogInfo("job finished", {{"job", std::to_string(job->id)},
                                   {"exit_code", std::to_string(exit_code)},
                                   {"reason", reason}});
  changed_.notify_all();
}

void JobRunner::Wait(Job* job) {
  // WNOWAIT leaves mpirun a zombie: its pid, and so its session id, cannot be reused while the
  // leftovers of its tree are being killed.
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(job->pid), &info, WEXITED | WNOWAIT) != 0 &&
         errno == EINTR) {
  }
  std::vector<ProcessId> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot = job->kill_snapshot;
  }
  for (int round = 0; round < 50; ++round) {
    auto table = ListProcesses();
    auto left = JobTree(table, job->pid, 0);
    for (const auto& p : WithDescendants(table, snapshot)) left.push_back(p);
    std::erase_if(left, [&](const ProcessId& p) { return p.pid == job->pid; });
    if (left.empty() || SignalAll(left, SIGKILL) == 0) break;
    ::usleep(20 * 1000);
  }
  int status = 0;
  while (::waitpid(job->pid, &status, 0) < 0 && errno == EINTR) {
  }
  logs_->Collect(job->id, /*final=*/true);
  logs_->MarkFinished(job->id);

  ExitDescription d = DescribeWaitStatus(status);
  std::function<void(int64_t)> on_finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Finish(job, d.exit_code, job->kill_requested ? job->kill_reason : d.reason);
    on_finish = on_finish_;
  }
  if (on_finish) on_finish(job->id);
}

void JobRunner::Kill(int64_t job_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    for (int64_t done : recently_acknowledged_) {
      if (done == job_id) return;
    }
    auto job = std::make_unique<Job>();
    job->id = job_id;
    Finish(job.get(), 128 + SIGKILL, reason + " (was not running on this node)");
    jobs_[job_id] = std::move(job);
    return;
  }
  Job* job = it->second.get();
  if (!job->running || job->kill_requested) return;
  job->kill_requested = true;
  job->kill_reason = reason;
  job->killer = std::thread([this, job] { KillTree(job); });
}

void JobRunner::KillTree(Job* job) {
  // mpirun leads its session; its ranks sit in process groups of their own within it.
  auto tree = JobTree(ListProcesses(), job->pid, job->pid);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job->kill_snapshot = tree;
  }
  common::LogInfo("killing job",
                  {{"job", std::to_string(job->id)}, {"processes", std::to_string(tree.size())}});
  SignalAll(tree, SIGTERM);
  std::unique_lock<std::mutex> lock(mu_);
  if (changed_.wait_for(lock, options_.kill_grace, [job] { return !job->running; })) return;
  lock.unlock();
  auto table = ListProcesses();
  auto all = JobTree(table, job->pid, job->pid);
  for (const auto& p : WithDescendants(table, tree)) {
    if (std::find(all.begin(), all.end(), p) == all.end()) all.push_back(p);
  }
  common::LogWarn("job survived SIGTERM; sending SIGKILL",
                  {{"job", std::to_string(job->id)}, {"processes", std::to_string(all.size())}});
  SignalAll(all, SIGKILL);
}

void JobRunner::KillAllAndWait(const std::string& reason) {
  std::vector<int64_t> running = Running();
  for (int64_t id : running) Kill(id, reason);
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] {
    for (const auto& [id, job] : jobs_) {
      if (job->running) return false;
    }
    return true;
  });
}

std::vector<int64_t> JobRunner::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running) out.push_back(id);
  }
  return out;
}

std::vector<RunningJob> JobRunner::RunningJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RunningJob> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running) out.push_back({id, job->tenant, job->pid});
  }
  return out;
}

std::vector<api::FinishedJob> JobRunner::Unreported() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<api::FinishedJob> out;
  for (const auto& [id, job] : jobs_) {
    if (!job->running) out.push_back(job->result);
  }
  return out;
}

void JobRunner::Acknowledge(const std::vector<int64_t>& job_ids) {
  std::vector<std::unique_ptr<Job>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : job_ids) {
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second->running) continue;
      done.push_back(std::move(it->second));
      jobs_.erase(it);
      recently_acknowledged_.push_back(id);
      if (recently_acknowledged_.size() > kRememberAcknowledged) recently_acknowledged_.pop_front();
    }
  }
  for (auto& job : done) JoinThreads(job.get());
}

std::optional<JobIdentity> JobRunner::Identity(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second->running) return std::nullopt;
  return JobIdentity{it->second->token, it->second->tenant};
}

pid_t JobRunner::LauncherPid(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : it->second->pid;
}

std::optional<api::FinishedJob> JobRunner::WaitFinished(int64_t job_id,
                                                        std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  bool done = changed_.wait_for(lock, timeout, [&] {
    auto it = jobs_.find(job_id);
    return it != jobs_.end() && !it->second->running;
  });
  if (!done) return std::nullopt;
  return jobs_.at(job_id)->result;
}

void JobRunner::JoinThreads(Job* job) {
  if (job->waiter.joinable()) job->waiter.join();
  if (job->killer.joinable()) job->killer.join();
}

}  // namespace agent
