#include "agent/jobs/job_ledger.h"

#include <signal.h>

#include <filesystem>
#include <regex>

#include "common/log.h"
#include "common/parse_int.h"

namespace agent {

JobLedger::JobLedger(std::string records_dir) : records_(std::move(records_dir)) {}

HeldJob* JobLedger::Find(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

HeldJob* JobLedger::Add(std::unique_ptr<HeldJob> job) {
  HeldJob* j = job.get();
  jobs_[j->id] = std::move(job);
  return j;
}

void JobLedger::ForgetAcknowledged(int64_t job_id) { std::erase(recently_acknowledged_, job_id); }

bool JobLedger::WasAcknowledged(int64_t job_id) const {
  for (int64_t done : recently_acknowledged_) {
    if (done == job_id) return true;
  }
  return false;
}

std::vector<int64_t> JobLedger::Running() const {
  std::vector<int64_t> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running) out.push_back(id);
  }
  return out;
}

bool JobLedger::AnyRunning() const {
  for (const auto& [id, job] : jobs_) {
    if (job->running) return true;
  }
  return false;
}

std::set<int64_t> JobLedger::Held() const {
  std::set<int64_t> held;
  for (const auto& [id, job] : jobs_) held.insert(id);
  return held;
}

std::vector<api::LaunchAck> JobLedger::HeldLaunches() const {
  std::vector<api::LaunchAck> out;
  for (const auto& [id, job] : jobs_) {
    if (job->from_launch) out.push_back({id, job->attempt});
  }
  return out;
}

std::vector<RunningJob> JobLedger::RunningJobs() const {
  std::vector<RunningJob> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running && job->pid != 0) out.push_back({id, job->tenant, job->pid});
  }
  return out;
}

std::vector<api::FinishedJob> JobLedger::Unreported() const {
  std::vector<api::FinishedJob> out;
  for (const auto& [id, job] : jobs_) {
    if (job->running) continue;
    out.push_back(job->result);
    if (job->from_launch) out.back().attempt = job->attempt;
    // Put together for the heartbeat about to carry it: the last of the node's phases.
    MarkPhase(*job, &out.back().timings.reported_ms);
  }
  return out;
}

std::vector<std::unique_ptr<HeldJob>> JobLedger::TakeAcknowledged(
    const std::vector<int64_t>& job_ids) {
  std::vector<std::unique_ptr<HeldJob>> done;
  for (int64_t id : job_ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->running) continue;
    if (it->second->from_launch) records_.Remove(id);
    done.push_back(std::move(it->second));
    jobs_.erase(it);
    recently_acknowledged_.push_back(id);
    if (recently_acknowledged_.size() > kRememberAcknowledged) recently_acknowledged_.pop_front();
  }
  return done;
}

std::map<int64_t, std::unique_ptr<HeldJob>> JobLedger::TakeAll() {
  std::map<int64_t, std::unique_ptr<HeldJob>> all;
  all.swap(jobs_);
  return all;
}

std::unique_ptr<HeldJob> ReconciledJob(const JobRecord& r, const JobSandboxOptions& jobs,
                                       UidPool* uids) {
  auto job = std::make_unique<HeldJob>();
  job->id = r.job_id;
  job->attempt = r.attempt;
  job->from_launch = true;
  job->tenant = r.tenant;
  job->processes = r.processes;
  job->ended = true;
  if (r.finished) {
    // It ended under the earlier agent, which may not have told the server.
    job->result = *r.finished;
    job->result.job_id = r.job_id;
  } else {
    // Its watcher first, so that nothing else acts on the job while it is stopped here.
    if (r.watcher.pid > 0) SignalAll({r.watcher}, SIGKILL);
    int stopped = 0;
    if (r.processes) {
      stopped = StopJobProcesses(*r.processes, jobs.kill_grace);
      LockDir(jobs.JobDir(r.job_id), uids);
      LockDir(jobs.CheckpointDir(r.job_id), uids);
    }
    std::error_code ec;
    std::filesystem::remove_all(jobs.DownloadDir(r.job_id), ec);
    job->result = {r.job_id, 128 + SIGKILL,
                   "lost: the agent restarted while the job ran, and stopped " +
                       std::to_string(stopped) + " of its processes",
                   /*killed=*/false, /*lost=*/true};
  }
  common::LogWarn("reconciled a job an earlier agent held", {{"job", std::to_string(r.job_id)},
                                                             {"attempt", std::to_string(r.attempt)},
                                                             {"report", job->result.reason}});
  return job;
}

int PruneJobDirs(const std::string& data_dir, const std::set<int64_t>& held,
                 std::chrono::seconds max_age) {
  static const std::regex kJobDir(R"(job-(\d{1,18}))");
  const auto cutoff = std::filesystem::file_time_type::clock::now() - max_age;
  int removed = 0;
  for (const char* kind : {"jobs", "logs", "checkpoints", "downloads"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(data_dir + "/" + kind, ec)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      if (!std::regex_match(name, m, kJobDir)) continue;
      auto id = common::ParseInt64(m[1].str());
      if (!id.ok() || held.count(*id)) continue;
      std::error_code st;
      if (e.is_symlink(st) || !e.is_directory(st)) continue;
      auto when = std::filesystem::last_write_time(e.path(), st);
      if (st || when > cutoff) continue;
      std::filesystem::remove_all(e.path(), st);
      if (st) {
        common::LogWarn("cannot remove a finished job's directory",
                        {{"dir", e.path().string()}, {"error", st.message()}});
        continue;
      }
      ++removed;
    }
  }
  if (removed > 0) {
    common::LogInfo("removed finished jobs' directories",
                    {{"directories", std::to_string(removed)}});
  }
  return removed;
}

}  // namespace agent
