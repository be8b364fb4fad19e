// The rsh bridge's side that the heartbeat and the head's agent see (rsh_bridge.h): the worker
// assignments a heartbeat reply brings and the image each one's job runs in, prepared on a
// thread of its own; a kill; the daemons an earlier agent process left; and the end of the
// bridge. Starting a daemon is rsh_daemon_start.cc; a started daemon's output, stop and reaping
// are rsh_daemon.cc.
#include "agent/rsh/rsh_bridge.h"

#include <signal.h>

#include <algorithm>

#include "agent/launch/mpi_launch.h"
#include "agent/rsh/rsh_bridge_internal.h"
#include "agent/sandbox/job_processes.h"
#include "agent/sandbox/process_tree.h"
#include "common/log.h"

namespace agent {

using rsh_bridge_internal::CheckJobToken;
using rsh_bridge_internal::NoPartHere;

RshBridge::RshBridge(RshBridgeOptions options, UidPool* uids, RankLogs* logs)
    : options_(std::move(options)),
      records_(options_.jobs.data_dir + "/daemons/running"),
      uids_(uids),
      logs_(logs) {}

int RshBridge::StopLeftovers() {
  std::vector<JobRecord> found = records_.LoadAll();
  for (const JobRecord& r : found) {
    // Its watcher first, so that nothing else acts on the daemon while it is stopped here.
    if (r.watcher.pid > 0) SignalAll({r.watcher}, SIGKILL);
    int stopped = 0;
    if (r.processes) {
      stopped = StopJobProcesses(*r.processes, options_.jobs.kill_grace);
      LockDir(JobDir(r.job_id), uids_);
      LockDir(options_.jobs.CheckpointDir(r.job_id), uids_);
    }
    records_.Remove(r.job_id);
    common::LogWarn("stopped a job daemon an earlier agent left",
                    {{"job", std::to_string(r.job_id)},
                     {"attempt", std::to_string(r.attempt)},
                     {"processes", std::to_string(stopped)}});
  }
  return static_cast<int>(found.size());
}

RshBridge::~RshBridge() {
  std::vector<std::shared_ptr<RemoteDaemon>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    assignments_.clear();
    all = all_;
  }
  for (auto& d : all) d->Stop("agent shutting down");
  for (auto& d : all) {
    if (d->waiter_.joinable()) d->waiter_.join();
    if (d->killer_.joinable()) d->killer_.join();
  }
  std::vector<Preparer> preparers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    preparers.swap(preparers_);
  }
  for (Preparer& p : preparers) p.thread.join();
}

std::shared_ptr<RshBridge::ImagePrep> RshBridge::StartImagePrep(const api::Command& worker) {
  auto ref = ImageOf(worker.spec);
  if (ref.ok() && !*ref) return nullptr;
  auto prep = std::make_shared<ImagePrep>();
  if (!ref.ok()) {
    prep->done = true;
    prep->status = ref.status();
    return prep;
  }
  prep->name = (*ref)->name;
  if (options_.images == nullptr) {
    prep->done = true;
    prep->status = common::FailedPrecondition(
        "cannot prepare image " + prep->name + ": this node runs no images (its agent has no "
        "image cache)");
    return prep;
  }
  // Those done are joined now: a preparer's last act is setting its flag under mu_, held here.
  std::erase_if(preparers_, [](Preparer& p) {
    if (!*p.done) return false;
    p.thread.join();
    return true;
  });
  common::LogInfo("preparing image", {{"job", std::to_string(worker.job_id)},
                                      {"image", prep->name},
                                      {"digest", (*ref)->digest}});
  auto finished = std::make_shared<bool>(false);
  std::thread t([this, finished, held = prep, image = **ref]() mutable {
    auto use = options_.images->Acquire(image.digest, image.path);
    std::shared_ptr<ImagePrep> prep = std::move(held);  // released before the flag is set
    if (!use.ok()) {
      common::LogWarn("cannot prepare image",
                      {{"image", image.name}, {"error", use.status().message()}});
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (use.ok()) {
      prep->use = std::move(*use);
    } else {
      prep->status = common::FailedPrecondition("cannot prepare image " + image.name + ": " +
                                                use.status().message());
    }
    prep->done = true;
    // An assignment that ended meanwhile held the last other reference: the image goes now,
    // under mu_ (ImageUse's release takes only the cache's own lock).
    prep.reset();
    *finished = true;
  });
  preparers_.push_back({finished, std::move(t)});
  return prep;
}

common::Result<bool> RshBridge::ImageReady(int64_t job_id, const std::string& authorization) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = assignments_.find(job_id);
  if (it == assignments_.end()) return NoPartHere(job_id);
  EMBODY_RETURN_IF_ERROR(CheckJobToken(it->second.worker, authorization));
  const std::shared_ptr<ImagePrep>& image = it->second.image;
  if (!image) return true;
  if (!image->done) return false;
  if (!image->status.ok()) return image->status;
  return true;
}

std::string RshBridge::JobDir(int64_t job_id) const { return options_.jobs.JobDir(job_id); }

std::string RshBridge::LogDir(int64_t job_id) const { return options_.jobs.LogDir(job_id); }

void RshBridge::SetAssignments(const std::vector<api::Command>& workers) {
  std::vector<std::shared_ptr<RemoteDaemon>> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<int64_t, Assignment> next;
    for (const api::Command& w : workers) {
      if (w.type != api::Command::Type::kWorker) continue;
      if (w.held) {
        // "Keep it as it is": only what this bridge holds in full, of that attempt. Anything
        // else is not listed in the next heartbeat, which brings it in full.
        auto it = assignments_.find(w.job_id);
        if (it != assignments_.end() && it->second.worker.attempt == w.attempt) {
          next[w.job_id] = it->second;
        }
        continue;
      }
      Assignment a;
      a.worker = w;
      auto it = assignments_.find(w.job_id);
      const bool same_attempt = it != assignments_.end() && it->second.worker.attempt == w.attempt;
      if (same_attempt && it->second.worker.job_token_sha256 == w.job_token_sha256) {
        a.daemon = it->second.daemon;
      }
      // The image of an attempt is prepared once, however often its assignment comes in full.
      a.image = same_attempt ? it->second.image : StartImagePrep(w);
      next[w.job_id] = std::move(a);
    }
    for (auto& [id, a] : assignments_) {
      auto n = next.find(id);
      if (a.daemon && (n == next.end() || n->second.daemon != a.daemon)) ended.push_back(a.daemon);
    }
    assignments_.swap(next);
  }
  for (auto& d : ended) d->Stop("the job's placement on this node ended");
}

std::vector<api::LaunchAck> RshBridge::HeldAssignments() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<api::LaunchAck> held;
  for (const auto& [id, a] : assignments_) held.push_back({id, a.worker.attempt});
  return held;
}

void RshBridge::Kill(int64_t job_id) {
  std::shared_ptr<RemoteDaemon> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = assignments_.find(job_id);
    if (it == assignments_.end()) return;
    d = it->second.daemon;
    assignments_.erase(it);
  }
  if (d) d->Stop("job killed");
}

std::vector<int64_t> RshBridge::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  for (const auto& d : all_) {
    std::lock_guard<std::mutex> dl(d->mu_);
    if (!d->exit_code_) out.push_back(d->job_id_);
  }
  return out;
}

}  // namespace agent
