// Checkpoint blob routes (service/checkpoints_service.h says who may do what; docs/checkpoints.md
// the protocol). The chunk and download bodies are raw bytes, not JSON.
#include "controlplane/http/blob_response.h"
#include "controlplane/http/routes.h"

namespace controlplane::http {

using A = Router::Auth;

namespace {

// Path ids: 1 the job, 2 the checkpoint.
struct Ids {
  int64_t job = 0;
  int64_t checkpoint = 0;
};
common::Result<Ids> CheckpointIds(const httplib::Request& req) {
  EMBODY_ASSIGN_OR_RETURN(job, PathId(req, 1, "job"));
  EMBODY_ASSIGN_OR_RETURN(ckpt, PathId(req, 2, "checkpoint"));
  return Ids{job, ckpt};
}
}  // namespace

void AddCheckpointRoutes(Router& router, const ApiDeps& deps) {
  service::CheckpointsService& ckpts = *deps.checkpoints;

  router.Handle("POST", "/v1/jobs/{id}/checkpoints", A::kBearer,
                [&ckpts](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "job " + std::to_string(*id);
                  RespondResult(res, ckpts.StartUpload(ctx.principal, *id, req.body), 201);
                });

  router.Handle("GET", "/v1/jobs/{id}/checkpoints", A::kBearer,
                [&ckpts](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto id = PathId(req, 1, "job");
                  if (!id.ok()) return RespondError(res, id.status());
                  RespondResult(res, ckpts.List(ctx.principal, *id));
                });

  router.Handle("GET", "/v1/jobs/{id}/checkpoints/{checkpoint_id}", A::kBearer,
                [&ckpts](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto ids = CheckpointIds(req);
                  if (!ids.ok()) return RespondError(res, ids.status());
                  RespondResult(res, ckpts.Entry(ctx.principal, ids->job, ids->checkpoint));
                });

  router.Handle("DELETE", "/v1/jobs/{id}/checkpoints/{checkpoint_id}", A::kBearer,
                [&ckpts](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto ids = CheckpointIds(req);
                  if (!ids.ok()) return RespondError(res, ids.status());
                  ctx.audit_target = "checkpoint " + std::to_string(ids->checkpoint);
                  common::Status st = ckpts.Delete(ctx.principal, ids->job, ids->checkpoint);
                  if (!st.ok()) return RespondError(res, st);
                  RespondJson(res, 200, {{"deleted", ids->checkpoint}});
                });

  router.Handle("PUT", "/v1/jobs/{id}/checkpoints/{checkpoint_id}/data", A::kBearer,
                [&ckpts](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto ids = CheckpointIds(req);
                  if (!ids.ok()) return RespondError(res, ids.status());
                  ctx.audit_target = "checkpoint " + std::to_string(ids->checkpoint);
                  if (!req.has_param("offset")) {
                    return RespondError(res, common::InvalidArgument("is required", "offset"));
                  }
                  auto offset = QueryInt(req, "offset", 0);
                  if (!offset.ok()) return RespondError(res, offset.status());
                  RespondResult(res,
                                ckpts.PutChunk(ctx.principal, ids->job, ids->checkpoint, *offset,
                                               req.get_header_value("X-Content-Sha256"), req.body));
                });

  router.Handle("POST", "/v1/jobs/{id}/checkpoints/{checkpoint_id}/commit", A::kBearer,
                [&ckpts](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto ids = CheckpointIds(req);
                  if (!ids.ok()) return RespondError(res, ids.status());
                  ctx.audit_target = "checkpoint " + std::to_string(ids->checkpoint);
                  RespondResult(res,
                                ckpts.Commit(ctx.principal, ids->job, ids->checkpoint, req.body));
                });

  router.Handle("GET", "/v1/jobs/{id}/checkpoints/{checkpoint_id}/data", A::kBearer,
                [&ckpts](const httplib::Request& req, httplib::Response& res, RequestContext& ctx) {
                  auto ids = CheckpointIds(req);
                  if (!ids.ok()) return RespondError(res, ids.status());
                  auto d = ckpts.OpenData(ctx.principal, ids->job, ids->checkpoint);
                  if (!d.ok()) return RespondError(res, d.status());
                  RespondWithBlob(req, res, d->reader, "X-Checkpoint-Sha256", d->blob.sha256);
                });
}

}  // namespace controlplane::http
