#include "agent/heartbeat/heartbeat_loop.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "common/log.h"
#include "common/time_util.h"

namespace agent {

HeartbeatLoop::HeartbeatLoop(HeartbeatOptions options, ServerChannel* server,
                             NodeCredential* credential, JobRunner* runner, RankLogs* logs,
                             EventQueue* events, AgentMetrics* metrics)
    : options_(std::move(options)),
      server_(server),
      credential_(credential),
      runner_(runner),
      logs_(logs),
      events_(events),
      metrics_(metrics),
      rng_(static_cast<unsigned>(common::NowMillis() ^ ::getpid())) {}

int64_t HeartbeatLoop::node_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return node_id_;
}

std::chrono::milliseconds HeartbeatLoop::interval() const {
  std::lock_guard<std::mutex> lock(mu_);
  return interval_;
}

HeartbeatLoop::Outcome HeartbeatLoop::Register() {
  auto r = server_->Register(options_.node);
  if (!r.ok() && r.status().code() == common::Code::kUnauthenticated &&
      credential_->HasNodeToken()) {
    common::LogWarn("the server refused the node credential; registering with the join token",
                    {{"error", r.status().ToString()}});
    credential_->Forget();
    r = server_->Register(options_.node);
  }
  if (!r.ok()) {
    metrics_->HeartbeatFailed();
    common::LogWarn("register failed", {{"error", r.status().ToString()}});
    return Outcome::kFailed;
  }
  if (!r->node_token.empty()) {
    if (auto st = credential_->Adopt(r->node_token); !st.ok()) {
      common::LogError("cannot keep the node credential", {{"error", st.ToString()}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  node_id_ = r->node_id;
  interval_ = std::chrono::milliseconds(std::max(50, r->heartbeat_interval_ms));
  common::LogInfo("registered",
                  {{"node_id", std::to_string(node_id_)},
                   {"heartbeat_interval_ms", std::to_string(interval_.count())},
                   {"credential", credential_->HasNodeToken() ? "node" : "join token"}});
  return Outcome::kOk;
}

HeartbeatLoop::Outcome HeartbeatLoop::RunOnce(bool execute_commands) {
  if (this->node_id() == 0 && Register() != Outcome::kOk) return Outcome::kFailed;
  int64_t node_id = this->node_id();

  api::HeartbeatRequest req;
  {
    // From here on a Wake() (a job ended) is news this round may not carry: it keeps the round
    // from being held, or aborts it if held, and the next round goes at once.
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = false;
  }
  logs_->CollectAll();
  auto running = runner_->Running();
  EventQueue::Batch events =
      events_->Peek(options_.max_events_per_heartbeat, options_.max_event_bytes_per_heartbeat);
  RankLogs::Batch logs = logs_->NextBatch();
  std::vector<int64_t> reported;
  for (auto& f : runner_->Unreported()) {
    bool logs_complete = !logs_->Tracking(f.job_id) || logs.complete_jobs.count(f.job_id) > 0;
    if (!logs_complete || events.jobs_with_more.count(f.job_id) > 0) continue;
    reported.push_back(f.job_id);
    req.finished.push_back(std::move(f));
  }
  std::set<int64_t> ended(reported.begin(), reported.end());
  for (int64_t id : running) {
    if (!ended.count(id)) req.running.push_back(id);
  }
  // Every launch held acknowledges its launch command: the server repeats a launch until then.
  req.has_launched = true;
  req.launched = runner_->HeldLaunches();
  // And every worker assignment held in full: the server sends those short.
  if (held_workers_) {
    req.has_workers = true;
    req.workers = held_workers_();
  }
  req.events = std::move(events.events);
  req.logs = std::move(logs.chunks);
  const bool idle = req.finished.empty() && req.events.empty() && req.logs.empty();
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A Wake() already pending (a job just ended) is reported by the next round, not held.
    in_held_call_ = options_.hold_idle_heartbeats && idle && execute_commands && !woken_ &&
                    !stop_;
    interrupted_ = false;
    if (in_held_call_) req.wait_ms = static_cast<int>(interval_.count());
    // Ended jobs, and none left that could end meanwhile: the server may hold the report for
    // the scheduling pass it wakes (a cycle), so the freed slots' next launch comes back in
    // this reply. Such a call is never given up (Wake does not interrupt it: it carries what
    // must not be sent twice), so with another job running here, whose end would wait behind
    // the pass, the report goes unheld and the next idle heartbeat takes the launch.
    if (options_.hold_idle_heartbeats && !req.finished.empty() && req.running.empty() &&
        execute_commands && !stop_) {
      req.wait_ms = static_cast<int>(interval_.count());
    }
  }
  const auto started = std::chrono::steady_clock::now();
  auto reply = server_->Heartbeat(node_id, req);
  bool interrupted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_held_call_ = false;
    interrupted = interrupted_;
    last_call_ = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
  }
  if (!reply.ok() && interrupted) return Outcome::kInterrupted;
  if (!reply.ok()) {
    metrics_->HeartbeatFailed();
    if (reply.status().code() == common::Code::kNotFound) {
      common::LogWarn("server does not know this node; registering again",
                      {{"node_id", std::to_string(node_id)}});
      std::lock_guard<std::mutex> lock(mu_);
      node_id_ = 0;
      return Outcome::kReregister;
    }
    if (reply.status().code() == common::Code::kUnauthenticated && credential_->HasNodeToken()) {
      common::LogWarn("the server refused the node credential; registering with the join token",
                      {{"node_id", std::to_string(node_id)}});
      credential_->Forget();
      std::lock_guard<std::mutex> lock(mu_);
      node_id_ = 0;
      return Outcome::kReregister;
    }
    common::LogWarn("heartbeat failed", {{"error", reply.status().ToString()}});
    return Outcome::kFailed;
  }
  metrics_->HeartbeatSucceeded();
  logs_->Commit(req.logs);
  events_->Commit(events.last_seq);
  // An end the server did not take yet (HeartbeatResponse::deferred) is reported again.
  std::set<int64_t> deferred(reply->deferred.begin(), reply->deferred.end());
  std::vector<int64_t> taken;
  for (int64_t id : reported) {
    if (!deferred.count(id)) taken.push_back(id);
  }
  runner_->Acknowledge(taken);
  bool launched_new = false;
  if (execute_commands) {
    std::vector<api::Command> workers;
    for (const auto& cmd : reply->commands) {
      if (cmd.type == api::Command::Type::kLaunch) {
        runner_->Launch(cmd);
      } else if (cmd.type == api::Command::Type::kWorker) {
        workers.push_back(cmd);
      } else {
        runner_->Kill(cmd.job_id);
        if (on_kill_) on_kill_(cmd.job_id);
      }
    }
    if (on_workers_) on_workers_(workers);
    for (const api::LaunchAck& held : runner_->HeldLaunches()) {
      launched_new = launched_new ||
                     std::find(req.launched.begin(), req.launched.end(), held) == req.launched.end();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only news goes at once: a launch the runner took (its acknowledgement; it may also end
    // quickly) or an end reported. A repeated command is not: a launch waiting for an older attempt
    // of its job here to stop, or the kill of that attempt, comes in every reply until it ends,
    // and going again at once for it spun this loop (and the server's launch count) until then.
    // The job's end wakes the loop itself (Wake()).
    // An end the server deferred is news only once: it goes again with the next beat, not at
    // once, or the loop would spin until the server takes it.
    again_at_once_ = launched_new || !taken.empty() || woken_;
  }
  metrics_->SetJobsRunning(static_cast<int>(runner_->Running().size()));
  metrics_->SetEventsDropped(events_->dropped());
  return Outcome::kOk;
}

std::chrono::milliseconds HeartbeatLoop::Backoff(int failures) {
  // Never longer than the heartbeat interval: the server holds a node DOWN after 3 silent
  // intervals, counted from its own start when it was away, so an agent that backed off past
  // that would have its running jobs restarted by a server that merely restarted. A retry per
  // interval is what a live agent sends anyway.
  const int64_t cap = std::min<int64_t>(options_.max_backoff.count(), interval().count());
  int64_t ms = std::min<int64_t>(options_.first_backoff.count(), cap);
  for (int i = 1; i < failures && ms < cap; ++i) ms *= 2;
  ms = std::min<int64_t>(ms, cap);
  // +-20% so a thousand agents that lost the server together do not return together.
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(ms) * jitter(rng_)));
}

void HeartbeatLoop::WaitFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [this] { return stop_ || woken_; });
  woken_ = false;
}

void HeartbeatLoop::Run() {
  int failures = 0;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    Outcome o = RunOnce();
    if (o == Outcome::kInterrupted) continue;  // a job ended: report it now
    if (o == Outcome::kOk) {
      failures = 0;
      std::chrono::milliseconds wait = interval();
      {
        std::lock_guard<std::mutex> lock(mu_);
        // A held round already spent (most of) its interval at the server.
        wait = again_at_once_ ? std::chrono::milliseconds(0)
                              : std::max(std::chrono::milliseconds(0), wait - last_call_);
      }
      if (wait.count() > 0) WaitFor(wait);
    } else {
      // kReregister too: registering again happens at the next round, after a short wait so a
      // server that keeps answering 404 is not hammered.
      WaitFor(Backoff(++failures));
    }
  }
}

void HeartbeatLoop::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
  if (in_held_call_ && !interrupted_) {
    interrupted_ = true;
    server_->Interrupt();
  }
}

void HeartbeatLoop::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  woken_ = true;
  cv_.notify_all();
  if (in_held_call_ && !interrupted_) {
    interrupted_ = true;
    server_->Interrupt();
  }
}

}  // namespace agent
