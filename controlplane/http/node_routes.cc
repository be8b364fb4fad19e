#include "controlplane/http/routes.h"

#include "api/agent_protocol.h"

namespace controlplane::http {

using A = Router::Auth;

void AddNodeRoutes(Router& router, const ApiDeps& deps) {
  service::NodeService& nodes = *deps.nodes;

  router.Handle("GET", "/v1/prometheus/targets", A::kBearer,
                [&nodes, &deps](const httplib::Request& req, httplib::Response& res,
                                RequestContext& ctx) {
                  std::string self = deps.advertise_address;
                  if (self.empty()) self = req.get_header_value("Host");
                  if (self.empty()) {
                    return RespondError(res, common::InvalidArgument(
                                                 "no Host header and no --advertise address"));
                  }
                  auto targets = nodes.ScrapeTargets(ctx.principal, self, deps.tls != nullptr);
                  if (!targets.ok()) return RespondError(res, targets.status());
                  RespondJson(res, 200, *targets);
                });

  router.Handle("GET", "/v1/nodes", A::kBearer,
                [&nodes](const httplib::Request&, httplib::Response& res, RequestContext& ctx) {
                  RespondResult(res, nodes.List(ctx.principal));
                });

  for (const bool drain : {true, false}) {
    const std::string verb = drain ? "drain" : "undrain";
    router.Handle("POST", "/v1/nodes/{id}/" + verb, A::kBearer,
                  [&nodes, drain](const httplib::Request& req, httplib::Response& res,
                                  RequestContext& ctx) {
                    auto id = PathId(req, 1, "node");
                    if (!id.ok()) return RespondError(res, id.status());
                    ctx.audit_target = "node " + std::to_string(*id);
                    RespondResult(res, nodes.SetDraining(ctx.principal, *id, drain));
                  });
  }

  router.Handle("POST", "/v1/nodes/{id}/reset", A::kBearer,
                [&nodes](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "node");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "node " + std::to_string(*id);
                  RespondResult(res, nodes.Reset(ctx.principal, *id));
                });

  router.Handle("POST", "/v1/agents/register", A::kBearer,
                [&nodes](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto body = ParseJsonBody(req);
                  if (!body.ok()) return RespondError(res, body.status());
                  auto r = api::ParseRegisterRequest(*body);
                  if (!r.ok()) return RespondError(res, r.status());
                  auto reply = nodes.Register(ctx.principal, *r);
                  if (!reply.ok()) return RespondError(res, reply.status());
                  RespondJson(res, 200, api::ToJson(*reply));
                });

  router.Handle("POST", "/v1/agents/{id}/heartbeat", A::kBearer,
                [&nodes](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "node");
                  if (!id.ok()) return RespondError(res, id.status());
                  auto body = ParseJsonBody(req);
                  if (!body.ok()) return RespondError(res, body.status());
                  auto hb = api::ParseHeartbeatRequest(*body);
                  if (!hb.ok()) return RespondError(res, hb.status());
                  auto reply = nodes.Heartbeat(ctx.principal, *id, *hb);
                  if (!reply.ok()) return RespondError(res, reply.status());
                  RespondJson(res, 200, api::ToJson(*reply));
                });
}

}  // namespace controlplane::http
