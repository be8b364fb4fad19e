#include "bench/agent_sim/sim_agent.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace bench {

using nlohmann::json;

namespace {
constexpr int kSteps = 2;  // step events per job: one while it runs, one with its end
constexpr int kKilledExit = 128 + 9;
}  // namespace

json SimAgent::StepEvent(int64_t job_id, int step, double now) {
  // Numbers of the size a small training job reports (docs/contracts.md, step events), varied
  // per job so the stored series are not all alike.
  const double jitter = static_cast<double>(job_id % 97) / 97.0;
  return {{"type", "step"},
          {"step", step},
          {"steps", kSteps},
          {"loss", 2.5 / step + 0.1 * jitter},
          {"tokens_per_s", 40000.0 + 1000.0 * jitter},
          {"samples_per_s", 80.0 + jitter},
          {"step_seconds", 0.05 + 0.01 * jitter},
          {"lr", 3e-4}};
}

double SimAgent::RunSecondsOf(const json& spec) const {
  if (!spec.is_object()) return job_seconds_;
  const json command = spec.value("command", json::array());
  if (command.size() != 2 || command[0] != "sleep" || !command[1].is_string()) return job_seconds_;
  // A bench-made number ("0.734"): strtod's partial parse is refused, not guessed at.
  const std::string text = command[1].get<std::string>();
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(seconds >= 0)) return job_seconds_;
  return seconds;
}

api::HeartbeatRequest SimAgent::Build(double now) {
  api::HeartbeatRequest req;
  req.has_launched = true;
  req.has_workers = true;
  req.workers = workers_;
  const int64_t time_ms = static_cast<int64_t>(now * 1000);
  for (const auto& [id, job] : jobs_) {
    req.launched.push_back({id, job.attempt});
    const bool ended = job.killed || now >= job.ends;
    if (!job.first_step_sent) {
      req.events.push_back({id, time_ms, "step", StepEvent(id, 1, now)});
    }
    if (!ended) {
      req.running.push_back(id);
      continue;
    }
    if (!job.killed) {
      req.events.push_back({id, time_ms, "step", StepEvent(id, kSteps, now)});
      req.logs.push_back({id, 0, job.log_offset,
                          name_ + ": job " + std::to_string(id) + " attempt " +
                              std::to_string(job.attempt) + " ran " + std::to_string(kSteps) +
                              " simulated steps\n"});
    }
    api::FinishedJob done;
    done.job_id = id;
    done.exit_code = job.killed ? kKilledExit : 0;
    done.reason = job.killed ? "killed on cancel" : "exited with code 0";
    done.killed = job.killed;
    req.finished.push_back(std::move(done));
  }
  return req;
}

void SimAgent::Commit(const api::HeartbeatRequest& sent, const api::HeartbeatResponse& reply,
                      double now, JobObserver* observer) {
  for (const auto& e : sent.events) {
    auto it = jobs_.find(e.job_id);
    if (it != jobs_.end()) it->second.first_step_sent = true;
  }
  for (const auto& f : sent.finished) {
    auto it = jobs_.find(f.job_id);
    if (it == jobs_.end()) continue;
    finished_.insert({f.job_id, it->second.attempt});
    jobs_.erase(it);
    if (observer != nullptr) observer->Finished(f.job_id, f.exit_code, now);
  }
  // Worker commands come in every reply while their jobs live: the set is the whole list.
  workers_.clear();
  for (const auto& c : reply.commands) {
    if (c.type == api::Command::Type::kWorker) {
      workers_.push_back({c.job_id, c.attempt});
      continue;
    }
    if (c.type == api::Command::Type::kKill) {
      auto it = jobs_.find(c.job_id);
      if (it != jobs_.end()) it->second.killed = true;
      continue;
    }
    auto held = jobs_.find(c.job_id);
    if ((held != jobs_.end() && held->second.attempt >= c.attempt) ||
        finished_.count({c.job_id, c.attempt}) != 0) {
      ++repeated_launches_;
      continue;
    }
    Job job;
    job.attempt = c.attempt;
    job.ends = now + RunSecondsOf(c.spec);
    auto bytes = c.log_bytes.find(0);
    if (bytes != c.log_bytes.end()) job.log_offset = bytes->second;
    jobs_[c.job_id] = job;
    if (observer != nullptr) observer->Launched(c.job_id, now);
  }
}

double SimAgent::NextJobEnd() const {
  double next = std::numeric_limits<double>::infinity();
  for (const auto& [id, job] : jobs_) next = std::min(next, job.killed ? 0.0 : job.ends);
  return next;
}

}  // namespace bench
