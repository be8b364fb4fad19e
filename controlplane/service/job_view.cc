#include "controlplane/service/job_view.h"

#include "common/time_util.h"

namespace controlplane::service {

using nlohmann::json;

namespace {
json OptTime(const std::optional<int64_t>& ms) {
  return ms ? json(common::FormatTimeMillis(*ms)) : json(nullptr);
}
}  // namespace

Result<JobView> LoadJobView(UnitOfWork& uow, JobRecord job) {
  JobView v;
  EMBODY_ASSIGN_OR_RETURN(alloc, uow.allocations().PlacementForJob(job.id));
  EMBODY_ASSIGN_OR_RETURN(step, uow.events().Latest(job.id, "step"));
  EMBODY_ASSIGN_OR_RETURN(ckpt, uow.events().LatestCheckpoint(job.id));
  v.job = std::move(job);
  v.allocation = std::move(alloc);
  if (step) v.last_step = step->data;
  v.latest_checkpoint = ckpt;
  return v;
}

Result<std::vector<JobView>> LoadJobViews(UnitOfWork& uow, std::vector<JobRecord> jobs) {
  std::vector<int64_t> ids;
  ids.reserve(jobs.size());
  for (const JobRecord& j : jobs) ids.push_back(j.id);
  EMBODY_ASSIGN_OR_RETURN(allocs, uow.allocations().PlacementForJobs(ids));
  EMBODY_ASSIGN_OR_RETURN(steps, uow.events().LatestOfJobs(ids, "step"));
  EMBODY_ASSIGN_OR_RETURN(ckpts, uow.events().LatestCheckpoints(ids));
  std::vector<JobView> out;
  out.reserve(jobs.size());
  for (JobRecord& j : jobs) {
    JobView v;
    if (auto a = allocs.find(j.id); a != allocs.end()) v.allocation = std::move(a->second);
    if (auto s = steps.find(j.id); s != steps.end()) v.last_step = std::move(s->second.data);
    if (auto c = ckpts.find(j.id); c != ckpts.end()) v.latest_checkpoint = c->second;
    v.job = std::move(j);
    out.push_back(std::move(v));
  }
  return out;
}

json ToJson(const JobView& v) {
  const JobRecord& j = v.job;
  json alloc = json::array();
  for (const AllocationRecord& a : v.allocation) {
    alloc.push_back({{"node_id", a.node_id}, {"node", a.node_name}, {"ranks", a.ranks}});
  }
  json ckpt = nullptr;
  if (v.latest_checkpoint) {
    ckpt = {{"path", v.latest_checkpoint->path},
            {"step", v.latest_checkpoint->step},
            {"bytes", v.latest_checkpoint->bytes}};
  }
  json out = {{"id", j.id},
          {"tenant_id", j.tenant_id},
          {"tenant", j.tenant},
          {"name", j.name},
          {"kind", j.kind},
          {"state", api::JobStateName(j.state)},
          {"reason", j.reason},
          {"priority", j.priority},
          {"spec", j.spec},
          {"attempt", j.attempt},
          {"exit_code", j.exit_code ? json(*j.exit_code) : json(nullptr)},
          {"created_at", common::FormatTimeMillis(j.created_ms)},
          {"updated_at", common::FormatTimeMillis(j.updated_ms)},
          {"started_at", OptTime(j.started_ms)},
          {"finished_at", OptTime(j.finished_ms)},
          {"allocation", alloc},
          {"last_step", v.last_step ? *v.last_step : json(nullptr)},
          {"latest_checkpoint", ckpt}};
  if (v.launch_phases) out["launch_phases"] = *v.launch_phases;
  if (v.forecast) out["forecast"] = *v.forecast;
  if (v.pipeline) out["pipeline"] = *v.pipeline;
  return out;
}

namespace {

// The text nlohmann's dump() writes for a value, as the server sends it.
void AppendDump(const json& value, std::string& out) {
  out += value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A JSON string. Most strings here (names, states, times) need no escaping and are copied as
// they are; any other goes through nlohmann, so escapes and replaced bytes are exactly dump()'s.
void AppendString(const std::string& s, std::string& out) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x80 || c == '"' || c == '\\') return AppendDump(json(s), out);
  }
  out += '"';
  out += s;
  out += '"';
}

void AppendTime(const std::optional<int64_t>& ms, std::string& out) {
  if (!ms) {
    out += "null";
    return;
  }
  out += '"';
  out += common::FormatTimeMillis(*ms);
  out += '"';
}

}  // namespace

void AppendJson(const JobView& v, std::string& out) {
  // Keys in the order dump() writes an object's: sorted.
  const JobRecord& j = v.job;
  out += "{\"allocation\":[";
  for (size_t i = 0; i < v.allocation.size(); ++i) {
    const AllocationRecord& a = v.allocation[i];
    if (i) out += ',';
    out += "{\"node\":";
    AppendString(a.node_name, out);
    out += ",\"node_id\":" + std::to_string(a.node_id);
    out += ",\"ranks\":" + std::to_string(a.ranks) + "}";
  }
  out += "],\"attempt\":" + std::to_string(j.attempt);
  out += ",\"created_at\":";
  AppendTime(j.created_ms, out);
  out += ",\"exit_code\":" + (j.exit_code ? std::to_string(*j.exit_code) : std::string("null"));
  out += ",\"finished_at\":";
  AppendTime(j.finished_ms, out);
  if (v.forecast) {
    out += ",\"forecast\":";
    AppendDump(*v.forecast, out);
  }
  out += ",\"id\":" + std::to_string(j.id);
  out += ",\"kind\":";
  AppendString(j.kind, out);
  out += ",\"last_step\":";
  if (v.last_step) {
    AppendDump(*v.last_step, out);
  } else {
    out += "null";
  }
  out += ",\"latest_checkpoint\":";
  if (const auto& c = v.latest_checkpoint) {
    out += "{\"bytes\":" + std::to_string(c->bytes) + ",\"path\":";
    AppendString(c->path, out);
    out += ",\"step\":" + std::to_string(c->step) + "}";
  } else {
    out += "null";
  }
  if (v.launch_phases) {
    out += ",\"launch_phases\":";
    AppendDump(*v.launch_phases, out);
  }
  out += ",\"name\":";
  AppendString(j.name, out);
  out += ",\"priority\":" + std::to_string(j.priority);
  out += ",\"reason\":";
  AppendString(j.reason, out);
  out += ",\"spec\":";
  AppendDump(j.spec, out);
  out += ",\"started_at\":";
  AppendTime(j.started_ms, out);
  out += ",\"state\":\"";
  out += api::JobStateName(j.state);
  out += "\",\"tenant\":";
  AppendString(j.tenant, out);
  out += ",\"tenant_id\":" + std::to_string(j.tenant_id);
  out += ",\"updated_at\":";
  AppendTime(j.updated_ms, out);
  out += '}';
}

json ToJson(const EventRecord& e) {
  return {{"id", e.id},
          {"time", common::FormatTimeMillis(e.time_ms)},
          {"type", e.type},
          {"data", e.data}};
}

}  // namespace controlplane::service
