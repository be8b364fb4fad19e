// POST /v1/plan: a capacity plan for a JobSpec on a described cluster (planner/, docs/planner.md).
// Nothing is stored and nothing is scheduled: any person of the tenant may ask (viewer and up),
// machine credentials may not.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "api/v1/plan.h"
#include "common/status.h"
#include "controlplane/service/store.h"

namespace controlplane::service {

// Validates `body` ({job, gpus, cluster, options, workload}) with the jobs API's limits (the
// rank limits excepted: a plan may ask about a larger cluster than this one) and returns the
// plan. invalid_argument names the field ("job.engine.model.d_model", "gpus[1]").
common::Result<api::v1::Plan> PlanJob(const Principal& p, const std::string& body,
                                      const api::SpecLimits& limits);

}  // namespace controlplane::service
