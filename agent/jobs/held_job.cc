#include "agent/jobs/held_job.h"

namespace agent {

void MarkPhase(const HeldJob& job, int64_t* phase) {
  if (!job.received) return;
  *phase = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 *job.received)
               .count();
}

common::Status SaveJobRecord(const JobRecords& records, const HeldJob& job) {
  if (!job.from_launch) return common::Status::Ok();
  JobRecord r;
  r.job_id = job.id;
  r.attempt = job.attempt;
  r.tenant = job.tenant;
  r.processes = job.processes;
  if (job.watcher) r.watcher = job.watcher->id();
  if (job.ended) r.finished = job.result;
  return records.Save(r);
}

void JoinThreads(HeldJob* job) {
  if (job->preparer.joinable()) job->preparer.join();
  if (job->waiter.joinable()) job->waiter.join();
  if (job->killer.joinable()) job->killer.join();
}

}  // namespace agent
