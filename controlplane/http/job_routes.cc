#include "controlplane/http/routes.h"

#include "controlplane/service/job_view.h"

namespace controlplane::http {

using A = Router::Auth;

void AddJobRoutes(Router& router, const ApiDeps& deps) {
  service::JobsService& jobs = *deps.jobs;

  service::ForecastService* forecasts = deps.forecasts;

  router.Handle("POST", "/v1/jobs", A::kBearer,
                [&jobs, forecasts](const httplib::Request& req, httplib::Response& res,
                                   RequestContext& ctx) {
                  auto dry_run = QueryBool(req, "dry_run");
                  if (!dry_run.ok()) return RespondError(res, dry_run.status());
                  if (*dry_run) {
                    // Stores nothing, so it is not audited (router.h); refusals are the
                    // submission's own.
                    ctx.not_audited = true;
                    if (!forecasts) {
                      return RespondError(res, common::Unavailable("forecasts are not served"));
                    }
                    return RespondResult(res, forecasts->DryRun(ctx.principal, req.body));
                  }
                  auto r = jobs.Submit(ctx.principal, req.body,
                                       req.get_header_value("Idempotency-Key"));
                  if (!r.ok()) return RespondError(res, r.status());
                  ctx.audit_target = "job " + std::to_string(r->job.job.id);
                  RespondJson(res, r->created ? 201 : 200,
                              api::v1::ToJson(service::JobOf(std::move(r->job))));
                });

  router.Handle("GET", "/v1/jobs", A::kBearer,
                [&jobs](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto limit = QueryInt(req, "limit", 50);
                  if (!limit.ok()) return RespondError(res, limit.status());
                  auto tenant = QueryInt(req, "tenant_id", 0);
                  if (!tenant.ok()) return RespondError(res, tenant.status());
                  auto page = jobs.List(ctx.principal, static_cast<int>(*limit),
                                        req.get_param_value("cursor"),
                                        req.get_param_value("state"), *tenant,
                                        req.get_param_value("q"));
                  if (!page.ok()) return RespondError(res, page.status());
                  api::v1::JobList list;
                  list.jobs.reserve(page->jobs.size());
                  for (service::JobView& v : page->jobs) {
                    list.jobs.push_back(service::JobOf(std::move(v)));
                  }
                  list.next_cursor = std::move(page->next_cursor);
                  // What RespondJson writes for ToJson(list), one row at a time: a page of a
                  // thousand jobs is not built as a tree first (api/v1/job.h).
                  std::string body;
                  body.reserve(512 * (list.jobs.size() + 1));
                  api::v1::AppendJson(list, body);
                  body += '\n';
                  res.status = 200;
                  res.set_content(body, "application/json");
                });

  router.Handle("GET", "/v1/jobs/{id}", A::kBearer,
                [&jobs](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  auto v = jobs.Get(ctx.principal, *id);
                  if (!v.ok()) return RespondError(res, v.status());
                  RespondJson(res, 200, api::v1::ToJson(service::JobOf(std::move(*v))));
                });

  router.Handle("POST", "/v1/jobs/{id}/cancel", A::kBearer,
                [&jobs](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "job " + std::to_string(*id);
                  auto v = jobs.Cancel(ctx.principal, *id);
                  if (v.ok()) ctx.audit_target_tenant = v->job.tenant_id;
                  if (!v.ok()) return RespondError(res, v.status());
                  RespondJson(res, 200, api::v1::ToJson(service::JobOf(std::move(*v))));
                });

  router.Handle("GET", "/v1/jobs/{id}/events", A::kBearer,
                [&jobs](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  auto after = QueryInt(req, "after", 0);
                  if (!after.ok()) return RespondError(res, after.status());
                  auto limit = QueryInt(req, "limit", 100);
                  if (!limit.ok()) return RespondError(res, limit.status());
                  auto events = jobs.Events(ctx.principal, *id, *after, req.get_param_value("type"),
                                            static_cast<int>(*limit));
                  if (!events.ok()) return RespondError(res, events.status());
                  api::v1::EventList list;
                  list.events.reserve(events->size());
                  for (const auto& e : *events) list.events.push_back(service::EventOf(e));
                  RespondJson(res, 200, api::v1::ToJson(list));
                });

  router.Handle("GET", "/v1/jobs/{id}/metrics", A::kBearer,
                [&jobs](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  auto q = service::ParseMetricsRequest(req.get_param_value("names"),
                                                        req.get_param_value("since"),
                                                        req.get_param_value("max_points"));
                  if (!q.ok()) return RespondError(res, q.status());
                  auto series = jobs.Metrics(ctx.principal, *id, *q);
                  if (!series.ok()) return RespondError(res, series.status());
                  RespondJson(res, 200, *series);
                });

  router.Handle("GET", "/v1/jobs/{id}/forecast", A::kBearer,
                [forecasts](const httplib::Request& req, httplib::Response& res,
                            RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  if (!forecasts) {
                    return RespondError(res, common::Unavailable("forecasts are not served"));
                  }
                  RespondResult(res, forecasts->ForJob(ctx.principal, *id));
                });

  router.Handle("GET", "/v1/jobs/{id}/evaluation", A::kBearer,
                [&jobs](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  RespondResult(res, jobs.Evaluation(ctx.principal, *id));
                });
}

}  // namespace controlplane::http
