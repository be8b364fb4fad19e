// Tenants, tokens, the caller's identity and the audit log.
#include "controlplane/http/routes.h"

#include "controlplane/service/tenants_service.h"
#include "controlplane/service/tokens_service.h"

namespace controlplane::http {

using A = Router::Auth;

namespace {

// Responds with a tenant, its version as the ETag (the If-Match of a later PATCH).
void RespondTenant(httplib::Response& res, const common::Result<api::v1::Tenant>& r,
                   int ok_status = 200) {
  if (r.ok()) res.set_header("ETag", "\"" + std::to_string(r->version) + "\"");
  RespondResult(res, r, ok_status);
}

}  // namespace

void AddTenantRoutes(Router& router, const ApiDeps& deps) {
  service::TenantsService& tenants = *deps.tenants;
  service::TokensService& tokens = *deps.tokens;

  router.Handle("GET", "/v1/whoami", A::kBearer,
                [&tokens](const httplib::Request&, httplib::Response& res, RequestContext& ctx) {
                  RespondJson(res, 200, api::v1::ToJson(tokens.WhoAmI(ctx.principal)));
                });

  router.Handle("POST", "/v1/tenants", A::kBearer,
                [&tenants](const httplib::Request& req, httplib::Response& res,
                           RequestContext& ctx) {
                  auto r = tenants.Create(ctx.principal, req.body);
                  if (r.ok()) {
                    ctx.audit_target = "tenant " + std::to_string(r->id);
                    ctx.audit_target_tenant = r->id;
                  }
                  RespondTenant(res, r, 201);
                });
  router.Handle("GET", "/v1/tenants", A::kBearer,
                [&tenants](const httplib::Request&, httplib::Response& res, RequestContext& ctx) {
                  RespondResult(res, tenants.List(ctx.principal));
                });
  router.Handle("GET", "/v1/tenants/{id}", A::kBearer,
                [&tenants](const httplib::Request& req, httplib::Response& res,
                           RequestContext& ctx) {
                  auto id = PathId(req, 1, "tenant");
                  if (!id.ok()) return RespondError(res, id.status());
                  RespondTenant(res, tenants.Get(ctx.principal, *id));
                });
  router.Handle("GET", "/v1/tenants/{id}/usage", A::kBearer,
                [&tenants](const httplib::Request& req, httplib::Response& res,
                           RequestContext& ctx) {
                  auto id = PathId(req, 1, "tenant");
                  if (!id.ok()) return RespondError(res, id.status());
                  RespondResult(res, tenants.Usage(ctx.principal, *id, req.get_param_value("from"),
                                             req.get_param_value("to")));
                });
  router.Handle("PATCH", "/v1/tenants/{id}", A::kBearer,
                [&tenants](const httplib::Request& req, httplib::Response& res,
                           RequestContext& ctx) {
                  auto id = PathId(req, 1, "tenant");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "tenant " + std::to_string(*id);
                  ctx.audit_target_tenant = *id;
                  RespondTenant(res, tenants.Patch(ctx.principal, *id, req.body,
                                                   req.get_header_value("If-Match")));
                });

  router.Handle("POST", "/v1/tokens", A::kBearer,
                [&tokens](const httplib::Request& req, httplib::Response& res,
                          RequestContext& ctx) {
                  auto r = tokens.Create(ctx.principal, req.body);
                  if (r.ok()) {
                    ctx.audit_target =
                        "token " + std::to_string(r->token.id) + " (" + r->token.role + ")";
                    ctx.audit_target_tenant = r->token.tenant_id;
                  }
                  RespondResult(res, r, 201);
                });
  router.Handle("GET", "/v1/tokens", A::kBearer,
                [&tokens](const httplib::Request& req, httplib::Response& res,
                          RequestContext& ctx) {
                  auto tenant = QueryInt(req, "tenant_id", 0);
                  if (!tenant.ok()) return RespondError(res, tenant.status());
                  RespondResult(res, tokens.List(ctx.principal, *tenant));
                });
  router.Handle("DELETE", "/v1/tokens/{id}", A::kBearer,
                [&tokens](const httplib::Request& req, httplib::Response& res,
                          RequestContext& ctx) {
                  auto id = PathId(req, 1, "token");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "token " + std::to_string(*id);
                  auto r = tokens.Revoke(ctx.principal, *id);
                  if (r.ok()) ctx.audit_target_tenant = r->tenant_id;
                  RespondResult(res, r);
                });

  router.Handle("GET", "/v1/audit", A::kBearer,
                [&tokens](const httplib::Request& req, httplib::Response& res,
                          RequestContext& ctx) {
                  auto limit = QueryInt(req, "limit", 100);
                  if (!limit.ok()) return RespondError(res, limit.status());
                  RespondResult(res, tokens.Audit(ctx.principal, static_cast<int>(*limit),
                                            req.get_param_value("cursor")));
                });
}

}  // namespace controlplane::http
