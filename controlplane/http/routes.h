// Route tables, one function per resource family. Each handler parses, calls one service
// method and responds.
#pragma once

#include <atomic>

#include "controlplane/http/api_server.h"
#include "controlplane/http/router.h"

namespace controlplane::http {

// `r`'s value, a view of api/v1/ written by its one codec (ToJson, found by argument-dependent
// lookup), with `ok_status`; or its error as RespondError writes it.
template <typename View>
void RespondResult(httplib::Response& res, const common::Result<View>& r, int ok_status = 200) {
  if (!r.ok()) return RespondError(res, r.status());
  RespondJson(res, ok_status, ToJson(*r));
}

void AddJobRoutes(Router& router, const ApiDeps& deps);
void AddNodeRoutes(Router& router, const ApiDeps& deps);
// /v1/jobs/{id}/checkpoints...: the checkpoint blob store.
void AddCheckpointRoutes(Router& router, const ApiDeps& deps);
// Tenants, tokens, /v1/whoami, /v1/audit.
void AddTenantRoutes(Router& router, const ApiDeps& deps);
// /v1/datasets: import, list, read, delete.
void AddDatasetRoutes(Router& router, const ApiDeps& deps);
// /v1/pipelines: submit, list, read, cancel.
void AddPipelineRoutes(Router& router, const ApiDeps& deps);
// /v1/datasets/{id}/upload...: chunks, commit, and the agent's download (called by the above).
void AddDatasetUploadRoutes(Router& router, const ApiDeps& deps);
// GET /v1/jobs/{id}/logs; follow=1 streams until the job ended and its logs are flushed, or
// until `stopping` is set.
void AddLogRoutes(Router& router, const ApiDeps& deps, const std::atomic<bool>& stopping);
// POST /v1/plan: a capacity plan (docs/planner.md); nothing stored.
void AddPlanRoutes(Router& router, const ApiDeps& deps);
// The dashboard at / (web_files.h); registered after the API's routes.
void AddWebRoutes(Router& router, const ApiDeps& deps);

}  // namespace controlplane::http
