// Pipelines as tenants see them (docs/pipelines.md): submit (validated completely, nothing
// stored on any refusal), list, read (each step's state, its jobs, a gate's compared values),
// cancel (cascading to the steps' jobs); and the driver's pass that moves them on
// (pipeline_driver.h decides, this submits).
//
// Every step's job is submitted through JobsService::Submit as the pipeline's owner (the token
// that submitted it, while that token is live), so admission, quotas, fair share and accounting
// are exactly a tenant's own job's; an import step is queued as POST /v1/datasets queues one.
// Every call is scoped to the caller's tenant unless the caller is a cluster-admin; another
// tenant's pipeline is not found, never forbidden.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/v1/pipeline.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/pipeline_driver.h"
#include "controlplane/service/pipeline_store.h"

namespace controlplane::service {

class ForecastService;

struct PipelinesOptions {
  api::SpecLimits limits;
  std::string dataset_root;  // --dataset-root; "": import steps are refused at submit
  int default_max_priority = 100;
  PipelineDriverOptions driver;
  int period_ms = 1000;  // between the driver's passes (a submit or cancel wakes it sooner)
};

class PipelinesService {
 public:
  // `jobs` submits the steps' jobs; `wake` nudges the scheduler after an import was queued.
  PipelinesService(Database& db, JobsService& jobs, PipelinesOptions options, Clock now,
                   std::function<void()> wake);
  ~PipelinesService();  // stops the driver thread

  // 201 with the pipeline; nothing stored when any check fails.
  Result<api::v1::Pipeline> Submit(const Principal& p, const std::string& body);
  // POST /v1/pipelines?dry_run=true: refused exactly as Submit would refuse it, or, storing
  // nothing, each step's forecast: its job's as if submitted now (forecast_service.h), and
  // when the step is expected to start and end down the DAG, supposing every step succeeds at
  // its first attempt and every gate passes. A step is submitted once its needs have ended, so
  // its expected start is the latest expected end of its needs plus the wait its job would
  // have now; an import's run time, and so everything after it, is not predicted.
  Result<api::v1::PipelineDryRun> DryRun(const Principal& p, const std::string& body,
                                         ForecastService& forecasts);
  // Newest first, without their specs.
  Result<api::v1::PipelineList> List(const Principal& p, int limit, const std::string& cursor);
  Result<api::v1::Pipeline> Get(const Principal& p, int64_t id);
  // Marks it cancelling and runs its pass now: pending steps are cancelled, running steps' jobs
  // asked to stop. failed_precondition when it has already ended.
  Result<api::v1::Pipeline> Cancel(const Principal& p, int64_t id);

  // One pass over every active pipeline (the driver thread calls it; tests call it directly).
  Status Drive();
  // Runs Drive every period_ms, or sooner when woken, until Stop.
  void Start();
  void Stop();
  void Wake();

 private:
  // A spec that passed every check of Submit: parsed, as it would be stored, and each job
  // step's job with its references replaced by placeholders (by step index).
  struct Checked {
    PipelineSpec spec;
    nlohmann::json stored;
    std::map<int, api::JobSpec> jobs;
  };
  Result<Checked> Check(const Principal& p, const std::string& body, UnitOfWork& uow);
  // One pipeline: decide under its lock, commit, then make the submissions it asked for.
  Status DriveOne(int64_t id);
  // Submits one step and records the outcome.
  Status SubmitStep(const StepSubmission& s);
  Status SubmitImport(const StepSubmission& s);
  // Writes what happened to a submission into the step, under the pipeline's lock.
  Status Record(const StepSubmission& s, int64_t job_id, int64_t dataset_id, const Status& refused);
  // The owner principal of pipeline `p`, or why it can no longer act.
  Result<Principal> OwnerOf(UnitOfWork& uow, const PipelineRecord& p);

  Database& db_;
  JobsService& jobs_;
  const PipelinesOptions options_;
  Clock now_;
  std::function<void()> wake_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::thread thread_;
};

// The view of a stored pipeline (GET /v1/pipelines/{id}).
api::v1::Pipeline PipelineOf(const PipelineRecord& p);

}  // namespace controlplane::service
