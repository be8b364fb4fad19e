// /v1/datasets: import a file into a new dataset version (a job does the work), list, read with
// manifest and statistics, download a version's files, delete. Thin: the rules are in
// service/datasets_service.h.
#include "controlplane/http/blob_response.h"
#include "controlplane/http/routes.h"

namespace controlplane::http {

using A = Router::Auth;

void AddDatasetRoutes(Router& router, const ApiDeps& deps) {
  service::DatasetsService& datasets = *deps.datasets;

  router.Handle("POST", "/v1/datasets", A::kBearer,
                [&datasets](const httplib::Request& req, httplib::Response& res,
                            RequestContext& ctx) {
                  auto r = datasets.Import(ctx.principal, req.body);
                  if (r.ok()) ctx.audit_target = "dataset " + std::to_string(r->id);
                  RespondResult(res, r, 201);
                });
  router.Handle("GET", "/v1/datasets", A::kBearer,
                [&datasets](const httplib::Request& req, httplib::Response& res,
                            RequestContext& ctx) {
                  auto limit = QueryInt(req, "limit", 50);
                  if (!limit.ok()) return RespondError(res, limit.status());
                  auto tenant = QueryInt(req, "tenant_id", 0);
                  if (!tenant.ok()) return RespondError(res, tenant.status());
                  RespondResult(res, datasets.List(ctx.principal, static_cast<int>(*limit),
                                             req.get_param_value("cursor"),
                                             req.get_param_value("name"), *tenant));
                });
  router.Handle("GET", "/v1/datasets/{id}", A::kBearer,
                [&datasets](const httplib::Request& req, httplib::Response& res,
                            RequestContext& ctx) {
                  auto id = PathId(req, 1, "dataset");
                  if (!id.ok()) return RespondError(res, id.status());
                  RespondResult(res, datasets.Get(ctx.principal, *id));
                });
  // Raw bytes of dataset.json or one shard, with Range (a resumed download asks for the rest).
  router.Handle("GET", "/v1/datasets/{id}/files/{name}", A::kBearer,
                [&datasets](const httplib::Request& req, httplib::Response& res,
                            RequestContext& ctx) {
                  auto id = PathId(req, 1, "dataset");
                  if (!id.ok()) return RespondError(res, id.status());
                  const std::string name = req.matches[2];
                  ctx.audit_target = "dataset " + std::to_string(*id) + " file " + name;
                  auto f = datasets.OpenFile(ctx.principal, *id, name);
                  if (!f.ok()) return RespondError(res, f.status());
                  ctx.audit_target_tenant = f->tenant_id;
                  RespondWithBlob(req, res, f->reader, "", "");
                });
  router.Handle("DELETE", "/v1/datasets/{id}", A::kBearer,
                [&datasets](const httplib::Request& req, httplib::Response& res,
                            RequestContext& ctx) {
                  auto id = PathId(req, 1, "dataset");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "dataset " + std::to_string(*id);
                  auto r = datasets.Delete(ctx.principal, *id);
                  if (r.ok()) ctx.audit_target_tenant = r->tenant_id;
                  RespondResult(res, r);
                });
  AddDatasetUploadRoutes(router, deps);
}

}  // namespace controlplane::http
