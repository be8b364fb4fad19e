// What the API shows of a job, a node and an event: the records joined with what a client wants
// next to them (allocation, last step, latest checkpoint), and their JSON per docs/contracts.md.
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "controlplane/service/store.h"

namespace controlplane::service {

struct JobView {
  JobRecord job;
  std::vector<AllocationRecord> allocation;
  std::optional<nlohmann::json> last_step;  // data of the newest "step" event
  std::optional<CheckpointRecord> latest_checkpoint;
};

Result<JobView> LoadJobView(UnitOfWork& uow, JobRecord job);
// LoadJobView for a page of jobs in a fixed number of reads (three), whatever its length; in
// the order given.
Result<std::vector<JobView>> LoadJobViews(UnitOfWork& uow, std::vector<JobRecord> jobs);

nlohmann::json ToJson(const JobView& v);
nlohmann::json ToJson(const NodeRecord& n, int slots_used);
nlohmann::json ToJson(const EventRecord& e);

}  // namespace controlplane::service
