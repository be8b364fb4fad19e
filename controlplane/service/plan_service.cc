#include "controlplane/service/plan_service.h"

#include "controlplane/service/roles.h"
#include "planner/plan_request.h"

namespace controlplane::service {

common::Result<api::v1::Plan> PlanJob(const Principal& p, const std::string& body,
                                      const api::SpecLimits& limits) {
  EMBODY_RETURN_IF_ERROR(RequireAtLeast(p, kViewer, "planning jobs"));
  EMBODY_ASSIGN_OR_RETURN(request, planner::ParsePlanRequestText(body, limits));
  EMBODY_ASSIGN_OR_RETURN(
      plan, planner::MakePlan(request.workload, request.cluster, request.options, request.gpus));
  return planner::PlanView(plan, request);
}

}  // namespace controlplane::service
