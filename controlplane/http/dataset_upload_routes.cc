// Dataset upload routes (service/dataset_uploads.h says who may do what; docs/storage.md the
// protocol). Chunk and download bodies are raw bytes, not JSON. Registered whether or not this
// server keeps uploads, so a client learns why (409 naming the flag) rather than a 404.
#include "controlplane/http/blob_response.h"
#include "controlplane/http/routes.h"

namespace controlplane::http {

using A = Router::Auth;

namespace {

common::Status NoUploads() {
  return common::FailedPrecondition(
      "this server keeps no dataset uploads: start embody-server with --dataset-upload-max-gib N "
      "(N > 0)");
}

}  // namespace

void AddDatasetUploadRoutes(Router& router, const ApiDeps& deps) {
  service::DatasetUploads* uploads = deps.dataset_uploads;

  router.Handle("PUT", "/v1/datasets/{id}/upload", A::kBearer,
                [uploads](const httplib::Request& req, httplib::Response& res,
                          RequestContext& ctx) {
                  auto id = PathId(req, 1, "dataset");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "dataset " + std::to_string(*id);
                  if (!uploads) return RespondError(res, NoUploads());
                  if (!req.has_param("offset")) {
                    return RespondError(res, common::InvalidArgument("is required", "offset"));
                  }
                  auto offset = QueryInt(req, "offset", 0);
                  if (!offset.ok()) return RespondError(res, offset.status());
                  RespondResult(res, uploads->PutChunk(ctx.principal, *id, *offset,
                                                       req.get_header_value("X-Content-Sha256"),
                                                       req.body));
                });

  router.Handle("POST", "/v1/datasets/{id}/upload/commit", A::kBearer,
                [uploads](const httplib::Request& req, httplib::Response& res,
                          RequestContext& ctx) {
                  auto id = PathId(req, 1, "dataset");
                  if (!id.ok()) return RespondError(res, id.status());
                  ctx.audit_target = "dataset " + std::to_string(*id);
                  if (!uploads) return RespondError(res, NoUploads());
                  auto r = uploads->Commit(ctx.principal, *id);
                  if (r.ok()) ctx.audit_target_tenant = r->tenant_id;
                  RespondResult(res, r);
                });

  router.Handle("GET", "/v1/datasets/{id}/upload", A::kBearer,
                [uploads](const httplib::Request& req, httplib::Response& res,
                          RequestContext& ctx) {
                  auto id = PathId(req, 1, "dataset");
                  if (!id.ok()) return RespondError(res, id.status());
                  if (!uploads) return RespondError(res, NoUploads());
                  auto d = uploads->Open(ctx.principal, *id);
                  if (!d.ok()) return RespondError(res, d.status());
                  RespondWithBlob(req, res, d->reader, "X-Content-Sha256", d->sha256);
                });
}

}  // namespace controlplane::http
