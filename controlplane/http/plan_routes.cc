#include "controlplane/http/routes.h"

#include "controlplane/service/plan_service.h"

namespace controlplane::http {

using A = Router::Auth;

void AddPlanRoutes(Router& router, const ApiDeps& deps) {
  const api::SpecLimits limits = deps.jobs->limits();
  router.Handle("POST", "/v1/plan", A::kBearer,
                [limits](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  RespondResult(res, service::PlanJob(ctx.principal, req.body, limits));
                });
}

}  // namespace controlplane::http
