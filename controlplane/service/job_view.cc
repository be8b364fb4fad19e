#include "controlplane/service/job_view.h"

namespace controlplane::service {

using nlohmann::json;

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

api::v1::Job JobOf(JobView v) {
  JobRecord& j = v.job;
  api::v1::Job out;
  out.id = j.id;
  out.tenant_id = j.tenant_id;
  out.tenant = std::move(j.tenant);
  out.name = std::move(j.name);
  out.kind = std::move(j.kind);
  out.state = api::JobStateName(j.state);
  out.reason = std::move(j.reason);
  out.priority = j.priority;
  out.spec = std::move(j.spec);
  out.attempt = j.attempt;
  out.exit_code = j.exit_code;
  out.created_ms = j.created_ms;
  out.updated_ms = j.updated_ms;
  out.started_ms = j.started_ms;
  out.finished_ms = j.finished_ms;
  if (j.started_ms) {
    out.wait_seconds = static_cast<double>(*j.started_ms - j.created_ms) / 1000.0;
  }
  out.allocation.reserve(v.allocation.size());
  for (AllocationRecord& a : v.allocation) {
    out.allocation.push_back({a.node_id, std::move(a.node_name), a.ranks});
  }
  out.last_step = std::move(v.last_step);
  if (v.latest_checkpoint) {
    out.latest_checkpoint = api::v1::JobCheckpoint{std::move(v.latest_checkpoint->path),
                                                   v.latest_checkpoint->step,
                                                   v.latest_checkpoint->bytes};
  }
  out.launch_phases = std::move(v.launch_phases);
  out.forecast = std::move(v.forecast);
  out.pipeline = std::move(v.pipeline);
  return out;
}

api::v1::Event EventOf(const EventRecord& e) { return {e.id, e.time_ms, e.type, e.data}; }

json ToJson(const JobView& v) { return api::v1::ToJson(JobOf(v)); }

void AppendJson(const JobView& v, std::string& out) { api::v1::AppendJson(JobOf(v), out); }

json ToJson(const EventRecord& e) { return api::v1::ToJson(EventOf(e)); }

}  // namespace controlplane::service
