// /v1/pipelines: submit (or its dry run), list, read, cancel (docs/pipelines.md). Thin: the rules are in
// service/pipelines_service.h.
#include "controlplane/http/routes.h"

namespace controlplane::http {

using nlohmann::json;
using A = Router::Auth;

void AddPipelineRoutes(Router& router, const ApiDeps& deps) {
  service::PipelinesService* pipelines = deps.pipelines;
  auto served = [pipelines](httplib::Response& res) {
    if (pipelines) return true;
    RespondError(res, common::Unavailable("pipelines are not served"));
    return false;
  };

  service::ForecastService* forecasts = deps.forecasts;
  router.Handle("POST", "/v1/pipelines", A::kBearer,
                [pipelines, forecasts, served](const httplib::Request& req,
                                               httplib::Response& res, RequestContext& ctx) {
                  if (!served(res)) return;
                  auto dry_run = QueryBool(req, "dry_run");
                  if (!dry_run.ok()) return RespondError(res, dry_run.status());
                  if (*dry_run) {
                    // Stores nothing, so it is not audited, as a job's dry run.
                    ctx.not_audited = true;
                    if (!forecasts) {
                      return RespondError(res, common::Unavailable("forecasts are not served"));
                    }
                    return RespondResult(res, pipelines->DryRun(ctx.principal, req.body, *forecasts));
                  }
                  auto r = pipelines->Submit(ctx.principal, req.body);
                  if (r.ok()) ctx.audit_target = "pipeline " + std::to_string(r->id);
                  RespondResult(res, r, 201);
                });
  router.Handle("GET", "/v1/pipelines", A::kBearer,
                [pipelines, served](const httplib::Request& req, httplib::Response& res,
                                    RequestContext& ctx) {
                  if (!served(res)) return;
                  auto limit = QueryInt(req, "limit", 50);
                  if (!limit.ok()) return RespondError(res, limit.status());
                  RespondResult(res, pipelines->List(ctx.principal, static_cast<int>(*limit),
                                               req.get_param_value("cursor")));
                });
  router.Handle("GET", "/v1/pipelines/{id}", A::kBearer,
                [pipelines, served](const httplib::Request& req, httplib::Response& res,
                                    RequestContext& ctx) {
                  if (!served(res)) return;
                  auto id = PathId(req, 1, "pipeline");
                  if (!id.ok()) return RespondError(res, id.status());
                  RespondResult(res, pipelines->Get(ctx.principal, *id));
                });
  // No body is read: `curl -X POST .../cancel` is the whole request.
  router.Handle("POST", "/v1/pipelines/{id}/cancel", A::kBearer,
                [pipelines, served](const httplib::Request& req, httplib::Response& res,
                                    RequestContext& ctx) {
                  if (!served(res)) return;
                  auto id = PathId(req, 1, "pipeline");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "pipeline " + std::to_string(*id);
                  auto r = pipelines->Cancel(ctx.principal, *id);
                  if (r.ok()) ctx.audit_target_tenant = r->tenant_id;
                  RespondResult(res, r);
                });
}

}  // namespace controlplane::http
