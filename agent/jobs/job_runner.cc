#include "agent/jobs/job_runner.h"

#include <signal.h>

#include <map>
#include <memory>
#include <thread>

#include "agent/sandbox/uid_scrub.h"
#include "common/log.h"

namespace agent {

JobRunner::JobRunner(JobRunnerOptions options, RankLogs* logs)
    : options_(std::move(options)),
      logs_(logs),
      ledger_(options_.jobs.data_dir + "/running"),
      own_uids_(options_.jobs.sandbox),
      uids_(options_.uid_pool != nullptr ? *options_.uid_pool : own_uids_),
      preparer_(options_),
      launcher_(options_, logs_, uids_, ledger_.records()),
      reaper_(options_, logs_, uids_) {
  // What a finished job left in /tmp, /dev/shm and System V IPC goes before its uid is handed
  // out again. Never the agent's data directory nor the dataset root (either may sit under /tmp):
  // an import's staging output is the job uid's until PublishImport gives it to root.
  std::vector<std::string> keep{options_.jobs.data_dir};
  if (!options_.dataset_root.empty()) keep.push_back(options_.dataset_root);
  uids_.ScrubBeforeReuse(SharedScratchRoots(), keep);
}

JobRunner::~JobRunner() {
  KillAllAndWait("agent shutting down");
  std::map<int64_t, std::unique_ptr<HeldJob>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs = ledger_.TakeAll();
  }
  for (auto& [id, job] : jobs) JoinThreads(job.get());
}

void JobRunner::SetOnFinish(std::function<void(int64_t)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_finish_ = std::move(fn);
}

std::function<bool()> JobRunner::KillRequestedOf(HeldJob* job) {
  return [this, job] {
    std::lock_guard<std::mutex> lock(mu_);
    return job->kill_requested;
  };
}

void JobRunner::Launch(const api::Command& launch) {
  std::unique_lock<std::mutex> lock(mu_);
  // The server repeats a launch until this node acknowledges it (HeartbeatRequest::launched), so
  // the same launch may arrive again while the job is here: it is a no-op, never a second mpirun.
  // Once its end is acknowledged the server sends it no more; a launch of the same attempt after
  // that is a new placement (a preempted job goes back to the queue with its attempt unchanged).
  if (const HeldJob* held = ledger_.Find(launch.job_id)) {
    if (held->attempt != launch.attempt || !held->from_launch) {
      // Another attempt while this one is still here (the server does not know yet that it
      // ended): the job is already handled here.
      common::LogWarn("ignoring launch of a job this node already has",
                      {{"job", std::to_string(launch.job_id)},
                       {"attempt", std::to_string(launch.attempt)},
                       {"held_attempt", std::to_string(held->attempt)}});
    }
    return;
  }
  auto job = std::make_unique<HeldJob>();
  job->id = launch.job_id;
  job->attempt = launch.attempt;
  job->from_launch = true;
  job->tenant = launch.tenant;
  job->received = std::chrono::steady_clock::now();
  HeldJob* j = ledger_.Add(std::move(job));
  ledger_.ForgetAcknowledged(launch.job_id);
  // Written before anything starts: an agent restarted from here on knows it held the launch.
  if (common::Status st = SaveJobRecord(ledger_.records(), *j); !st.ok()) {
    return Finish(j, 1, "cannot record the job on this node: " + st.message());
  }
  auto image = ImageOf(launch.spec);
  if (!image.ok()) return Finish(j, 1, image.status().message());
  if (*image) {
    j->running = true;
    j->preparing = true;
    j->preparer =
        std::thread([this, j, launch, ref = **image] { PrepareImageThenStart(j, launch, ref); });
    return;
  }
  if (preparer_.NeedsFetch(launch)) {
    j->running = true;
    j->preparing = true;
    j->preparer = std::thread([this, j, launch] { FetchThenStart(j, launch); });
    return;
  }
  Start(j, launch, lock);
}

void JobRunner::PrepareImageThenStart(HeldJob* job, api::Command launch, const ImageRef& image) {
  common::Result<std::unique_ptr<ImageUse>> use = preparer_.AcquireImage(job->id, image);
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!use.ok()) {
      job->preparing = false;
      return Finish(job, 1, use.status().message());  // "cannot prepare image NAME: why"
    }
    job->image = std::move(*use);
    if (job->kill_requested) {
      job->preparing = false;
      return Finish(job, 128 + SIGKILL, job->kill_reason);
    }
  }
  if (launch.hosts.size() > 1) {
    common::Status peers =
        preparer_.WaitForPeerImages(job->id, launch, image, KillRequestedOf(job));
    std::unique_lock<std::mutex> lock(mu_);
    if (job->kill_requested) {
      job->preparing = false;
      return Finish(job, 128 + SIGKILL, job->kill_reason);
    }
    if (!peers.ok()) {
      job->preparing = false;
      return Finish(job, 1, peers.message());  // "node NAME: cannot prepare image ...: why"
    }
  }
  if (preparer_.NeedsFetch(launch)) return FetchThenStart(job, std::move(launch));
  std::unique_lock<std::mutex> lock(mu_);
  job->preparing = false;
  Start(job, launch, lock);
}

void JobRunner::FetchThenStart(HeldJob* job, api::Command launch) {
  JobPreparer::Fetched fetched = preparer_.Fetch(job->id, std::move(launch), KillRequestedOf(job));
  std::unique_lock<std::mutex> lock(mu_);
  job->preparing = false;
  job->upload_fetched = fetched.upload_fetched;
  job->upload_copy = fetched.upload_copy;
  if (job->kill_requested) return Finish(job, 128 + SIGKILL, job->kill_reason);
  if (!fetched.status.ok()) {
    common::LogWarn(fetched.log_message,
                    {{"job", std::to_string(job->id)}, {"error", fetched.status.ToString()}});
    return Finish(job, 1, fetched.reason);
  }
  Start(job, fetched.launch, lock);
}

std::string JobRunner::DownloadDir(int64_t job_id) const {
  return options_.jobs.DownloadDir(job_id);
}

std::string JobRunner::JobDir(int64_t job_id) const { return options_.jobs.JobDir(job_id); }

std::string JobRunner::LogDir(int64_t job_id) const { return options_.jobs.LogDir(job_id); }

std::vector<int> JobRunner::GpusInUse() const {
  return options_.gpus ? options_.gpus->InUse() : std::vector<int>{};
}

// Gives the job its uid, GPUs, directories and cgroup and starts mpirun, or records why it could
// not. `lock` holds mu_ on entry and on return; the launcher's Spawn runs without it.
void JobRunner::Start(HeldJob* job, const api::Command& launch,
                      std::unique_lock<std::mutex>& lock) {
  common::Result<JobLauncher::Planned> planned = launcher_.Plan(job, launch);
  if (!planned.ok()) {
    launcher_.Release(job);
    return Finish(job, 1, planned.status().message());
  }
  // What follows writes files, makes the cgroup and forks mpirun: tens of milliseconds in which
  // the runner's lock is not held, so the other slots' ends, the heartbeat and the local API
  // do not wait on this start. The job is held meanwhile as preparing (a kill waits for it).
  job->running = true;
  job->preparing = true;
  lock.unlock();
  JobLauncher::Spawned spawned = launcher_.Spawn(job, launch, *planned);
  lock.lock();
  job->preparing = false;
  if (!spawned.error.empty()) {
    launcher_.Release(job);
    return Finish(job, spawned.exit_code, spawned.error);
  }
  job->pid = spawned.pid;
  job->token = planned->in.job_token;
  common::LogInfo("job launched", {{"job", std::to_string(job->id)},
                                   {"attempt", std::to_string(job->attempt)},
                                   {"pid", std::to_string(job->pid)},
                                   {"ranks", std::to_string(planned->plan.total_ranks)},
                                   {"uid", job->uid ? std::to_string(*job->uid) : "agent's"},
                                   {"cgroup", job->cgroup ? job->cgroup->dirs().front() : "none"},
                                   {"gpus", planned->in.cuda_visible_devices.value_or("none")}});
  job->waiter = std::thread([this, job] { Wait(job); });
  if (job->kill_requested) job->killer = std::thread([this, job] { KillTree(job); });
}

void JobRunner::Finish(HeldJob* job, int exit_code, const std::string& reason) {
  job->running = false;
  job->image.reset();  // the cache may evict it now
  if (!job->upload_fetched.empty()) {
    // The server keeps the upload until the import ended; the node keeps no copy past the job.
    ::unlink(job->upload_fetched.c_str());
    ::unlink(job->upload_copy.c_str());
  }
  // Every caller has given the job's uid, GPUs and cgroup back by now.
  MarkPhase(*job, &job->timings.slot_freed_ms);
  job->result = {job->id, exit_code, reason, job->kill_requested};
  job->result.timings = job->timings;
  job->ended = true;
  if (common::Status st = SaveJobRecord(ledger_.records(), *job); !st.ok()) {
    common::LogWarn("cannot record the job's end",
                    {{"job", std::to_string(job->id)}, {"error", st.message()}});
  }
  common::LogInfo("job finished", {{"job", std::to_string(job->id)},
                                   {"exit_code", std::to_string(exit_code)},
                                   {"reason", reason}});
  changed_.notify_all();
}

int JobRunner::Reconcile() {
  std::vector<JobRecord> found = ledger_.records().LoadAll();
  for (const JobRecord& r : found) {
    std::unique_ptr<HeldJob> job = ReconciledJob(r, options_.jobs, &uids_);
    std::lock_guard<std::mutex> lock(mu_);
    if (ledger_.Find(r.job_id) != nullptr) continue;
    if (common::Status st = SaveJobRecord(ledger_.records(), *job); !st.ok()) {
      common::LogWarn("cannot record the job's end",
                      {{"job", std::to_string(r.job_id)}, {"error", st.message()}});
    }
    ledger_.Add(std::move(job));
  }
  return static_cast<int>(found.size());
}

int JobRunner::PruneFinishedDirs(std::chrono::seconds max_age) {
  std::set<int64_t> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held = ledger_.Held();
  }
  // A job held by a record but not (yet) by this runner: Reconcile has not run.
  for (const JobRecord& r : ledger_.records().LoadAll()) held.insert(r.job_id);
  return PruneJobDirs(options_.jobs.data_dir, held, max_age);
}

void JobRunner::Wait(HeldJob* job) {
  ExitDescription d = reaper_.Reap(job, [this, job] {
    std::lock_guard<std::mutex> lock(mu_);
    return job->kill_snapshot;
  });
  std::function<void(int64_t)> on_finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    launcher_.Release(job);
    Finish(job, d.exit_code, job->kill_requested ? job->kill_reason : d.reason);
    on_finish = on_finish_;
  }
  if (on_finish) on_finish(job->id);
}

void JobRunner::Kill(int64_t job_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  HeldJob* job = ledger_.Find(job_id);
  if (job == nullptr) {
    if (ledger_.WasAcknowledged(job_id)) return;
    auto unknown = std::make_unique<HeldJob>();
    unknown->id = job_id;
    Finish(unknown.get(), 128 + SIGKILL, reason + " (was not running on this node)");
    ledger_.Add(std::move(unknown));
    return;
  }
  if (!job->running || job->kill_requested) return;
  job->kill_requested = true;
  job->kill_reason = reason;
  if (job->preparing) return;  // nothing runs yet; the preparer ends it instead of starting it
  job->killer = std::thread([this, job] { KillTree(job); });
}

void JobRunner::KillTree(HeldJob* job) {
  std::vector<ProcessId> tree = JobReaper::Tree(*job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job->kill_snapshot = tree;
  }
  reaper_.Terminate(*job, tree);
  std::unique_lock<std::mutex> lock(mu_);
  if (changed_.wait_for(lock, options_.jobs.kill_grace, [job] { return !job->running; })) return;
  lock.unlock();
  reaper_.KillSurvivors(*job, tree);
}

void JobRunner::KillAllAndWait(const std::string& reason) {
  std::vector<int64_t> running = Running();
  for (int64_t id : running) Kill(id, reason);
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return !ledger_.AnyRunning(); });
}

std::vector<int64_t> JobRunner::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_.Running();
}

std::vector<api::LaunchAck> JobRunner::HeldLaunches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_.HeldLaunches();
}

std::vector<RunningJob> JobRunner::RunningJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_.RunningJobs();
}

std::vector<api::FinishedJob> JobRunner::Unreported() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ledger_.Unreported();
}

void JobRunner::Acknowledge(const std::vector<int64_t>& job_ids) {
  std::vector<std::unique_ptr<HeldJob>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done = ledger_.TakeAcknowledged(job_ids);
  }
  for (auto& job : done) JoinThreads(job.get());
}

std::optional<JobIdentity> JobRunner::Identity(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const HeldJob* job = ledger_.Find(job_id);
  if (job == nullptr || !job->running || job->token.empty()) return std::nullopt;
  return JobIdentity{job->token, job->tenant};
}

pid_t JobRunner::LauncherPid(int64_t job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const HeldJob* job = ledger_.Find(job_id);
  return job == nullptr ? 0 : job->pid;
}

std::optional<api::FinishedJob> JobRunner::WaitFinished(int64_t job_id,
                                                        std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  bool done = changed_.wait_for(lock, timeout, [&] {
    const HeldJob* job = ledger_.Find(job_id);
    return job != nullptr && !job->running;
  });
  if (!done) return std::nullopt;
  return ledger_.Find(job_id)->result;
}

}  // namespace agent
