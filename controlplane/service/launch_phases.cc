#include "controlplane/service/launch_phases.h"

#include "common/time_util.h"

namespace controlplane::service {

using nlohmann::json;

namespace {

std::optional<int64_t> MsOf(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

json OptMs(const std::optional<int64_t>& ms) { return ms ? json(*ms) : json(nullptr); }

json OptTime(const std::optional<int64_t>& ms) {
  return ms ? json(common::FormatTimeMillis(*ms)) : json(nullptr);
}

// The agent's timings, by their wire names without the "_ms" (the view's agent_ms object).
constexpr std::pair<const char*, int64_t api::LaunchTimings::*> kAgentTimings[] = {
    {"sandbox_prepared", &api::LaunchTimings::sandbox_prepared_ms},
    {"process_started", &api::LaunchTimings::process_started_ms},
    {"exited", &api::LaunchTimings::exited_ms},
    {"slot_freed", &api::LaunchTimings::slot_freed_ms},
    {"reported", &api::LaunchTimings::reported_ms}};

json AgentJson(const api::LaunchTimings& t) {
  json j = json::object();
  for (const auto& [name, field] : kAgentTimings) {
    if (t.*field >= 0) j[name] = t.*field;
  }
  return j;
}

api::LaunchTimings AgentFrom(const json& j) {
  api::LaunchTimings t;
  if (!j.is_object()) return t;
  for (const auto& [name, field] : kAgentTimings) {
    if (auto v = MsOf(j, name); v && *v >= 0) t.*field = *v;
  }
  return t;
}

}  // namespace

bool IsLaunchPhaseEvent(const std::string& type) {
  return type == kLaunchSentEvent || type == kLaunchPhasesEvent;
}

json LaunchSentData(const JobRecord& job, const std::string& node) {
  return {{"attempt", job.attempt}, {"node", node}, {"placed_ms", job.updated_ms}};
}

std::vector<Phase> PhaseDurations(const LaunchPhases& p) {
  std::vector<Phase> out;
  auto add = [&out](const char* name, std::optional<int64_t> from, std::optional<int64_t> to) {
    if (from && to) out.push_back({name, *to - *from});
  };
  auto agent = [](int64_t v) { return v >= 0 ? std::optional<int64_t>(v) : std::nullopt; };
  const api::LaunchTimings& a = p.agent;
  add("queued", p.submitted_ms, p.placed_ms);
  add("dispatch", p.placed_ms, p.launch_sent_ms);
  add("sandbox", int64_t{0}, agent(a.sandbox_prepared_ms));
  add("spawn", agent(a.sandbox_prepared_ms), agent(a.process_started_ms));
  add("run", agent(a.process_started_ms), agent(a.exited_ms));
  add("cleanup", agent(a.exited_ms), agent(a.slot_freed_ms));
  add("report", agent(a.slot_freed_ms), agent(a.reported_ms));
  if (p.launch_sent_ms && p.exit_stored_ms && a.reported_ms >= 0) {
    out.push_back({"transit", *p.exit_stored_ms - *p.launch_sent_ms - a.reported_ms});
  }
  return out;
}

LaunchPhases PhasesAtEnd(const JobRecord& job, const std::optional<EventRecord>& sent,
                         const api::FinishedJob& f, int64_t now) {
  LaunchPhases p;
  p.attempt = job.attempt;
  p.submitted_ms = job.created_ms;
  p.running_ms = job.started_ms;
  p.exit_stored_ms = now;
  p.agent = f.timings;
  // The launch this end answers: this attempt's latest hand-out (a preempted job placed again
  // keeps its attempt, and its latest launch_sent is the one that ran).
  if (sent && sent->data.is_object() && sent->data.value("attempt", -1) == job.attempt) {
    p.node = sent->data.value("node", "");
    p.placed_ms = MsOf(sent->data, "placed_ms");
    p.launch_sent_ms = sent->time_ms;
  }
  return p;
}

json ToStoredJson(const LaunchPhases& p) {
  return {{"attempt", p.attempt},
          {"node", p.node},
          {"submitted_ms", p.submitted_ms},
          {"placed_ms", OptMs(p.placed_ms)},
          {"launch_sent_ms", OptMs(p.launch_sent_ms)},
          {"running_ms", OptMs(p.running_ms)},
          {"exit_stored_ms", OptMs(p.exit_stored_ms)},
          {"agent_ms", AgentJson(p.agent)}};
}

std::optional<LaunchPhases> FromStoredJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  LaunchPhases p;
  p.attempt = j.value("attempt", 0);
  p.node = j.value("node", "");
  p.submitted_ms = MsOf(j, "submitted_ms").value_or(0);
  p.placed_ms = MsOf(j, "placed_ms");
  p.launch_sent_ms = MsOf(j, "launch_sent_ms");
  p.running_ms = MsOf(j, "running_ms");
  p.exit_stored_ms = MsOf(j, "exit_stored_ms");
  if (auto a = j.find("agent_ms"); a != j.end()) p.agent = AgentFrom(*a);
  return p;
}

std::optional<LaunchPhases> PhasesForView(const JobRecord& job,
                                          const std::optional<EventRecord>& phases,
                                          const std::optional<EventRecord>& sent) {
  // A launch handed out after the last recorded end is the one in progress.
  if (sent && (!phases || sent->id > phases->id) && sent->data.is_object()) {
    LaunchPhases p;
    p.attempt = sent->data.value("attempt", job.attempt);
    p.node = sent->data.value("node", "");
    p.submitted_ms = job.created_ms;
    p.placed_ms = MsOf(sent->data, "placed_ms");
    p.launch_sent_ms = sent->time_ms;
    if (p.attempt == job.attempt) p.running_ms = job.started_ms;
    return p;
  }
  if (phases) return FromStoredJson(phases->data);
  return std::nullopt;
}

json ToJson(const LaunchPhases& p) {
  json phases = json::array();
  for (const auto& [name, ms] : PhaseDurations(p)) phases.push_back({{"phase", name}, {"ms", ms}});
  return {{"attempt", p.attempt},
          {"node", p.node},
          {"placed_at", OptTime(p.placed_ms)},
          {"launch_sent_at", OptTime(p.launch_sent_ms)},
          {"running_at", OptTime(p.running_ms)},
          {"exit_stored_at", OptTime(p.exit_stored_ms)},
          {"agent_ms", AgentJson(p.agent)},
          {"phases", phases},
          {"total_ms", p.exit_stored_ms ? json(*p.exit_stored_ms - p.submitted_ms) : json(nullptr)}};
}

Result<std::optional<LaunchPhases>> LoadLaunchPhases(UnitOfWork& uow, const JobRecord& job) {
  EMBODY_ASSIGN_OR_RETURN(phases, uow.events().Latest(job.id, kLaunchPhasesEvent));
  EMBODY_ASSIGN_OR_RETURN(sent, uow.events().Latest(job.id, kLaunchSentEvent));
  return PhasesForView(job, phases, sent);
}

}  // namespace controlplane::service
