// What the API shows of a job and an event: the records joined with what a client wants
// next to them (allocation, last step, latest checkpoint), made into the API's views
// (api/v1/job.h), whose codec writes them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/v1/job.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

struct JobView {
  JobRecord job;
  std::vector<AllocationRecord> allocation;
  std::optional<nlohmann::json> last_step;  // data of the newest "step" event
  std::optional<CheckpointRecord> latest_checkpoint;
  // Where the launch's time went (launch_phases.h); loaded for a single job only, never for a
  // page (its field is then left out).
  std::optional<nlohmann::json> launch_phases;
  // The forecast made when it was submitted and how it came out (forecast_service.h); a single
  // job's view only.
  std::optional<nlohmann::json> forecast;
  // {"id", "name", "step", "attempt"} of the pipeline that submitted it (pipelines_service.h);
  // a single job's view only.
  std::optional<nlohmann::json> pipeline;
};

Result<JobView> LoadJobView(UnitOfWork& uow, JobRecord job);
// LoadJobView for a page of jobs in a fixed number of reads (three), whatever its length; in
// the order given.
Result<std::vector<JobView>> LoadJobViews(UnitOfWork& uow, std::vector<JobRecord> jobs);

// The API's view of the job: the one place that decides what each of its fields shows. Takes
// `v` by value: a caller done with its view moves it in, and the spec and step data are not
// copied.
api::v1::Job JobOf(JobView v);
api::v1::Event EventOf(const EventRecord& e);

// api::v1's codec on JobOf(v) / EventOf(e), for callers that keep their view (each copies it).
nlohmann::json ToJson(const JobView& v);
void AppendJson(const JobView& v, std::string& out);
nlohmann::json ToJson(const EventRecord& e);

}  // namespace controlplane::service
