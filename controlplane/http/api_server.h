// The HTTP front of embody-server: binds, serves the REST API, health, readiness and metrics on
// cpp-httplib's thread pool, and stops. Handlers are thin; the services do the work.
//
// Not here: business rules (service/), SQL (db/), process start-up (server.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "controlplane/http/metrics.h"
#include "controlplane/service/checkpoints_service.h"
#include "controlplane/service/datasets_service.h"
#include "controlplane/service/forecast_service.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/http/router.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/pipelines_service.h"
#include "controlplane/service/tenants_service.h"
#include "controlplane/service/tokens_service.h"

namespace common::http {
class ServerTls;
}

namespace controlplane::http {

struct ApiDeps {
  service::Database* db = nullptr;
  service::JobsService* jobs = nullptr;
  // POST /v1/jobs?dry_run=true and GET /v1/jobs/{id}/forecast; null: those answer 503.
  service::ForecastService* forecasts = nullptr;
  service::NodeService* nodes = nullptr;
  service::TenantsService* tenants = nullptr;
  service::TokensService* tokens = nullptr;
  service::CheckpointsService* checkpoints = nullptr;
  service::DatasetsService* datasets = nullptr;
  // /v1/pipelines; null: those answer 503.
  service::PipelinesService* pipelines = nullptr;
  // nullptr: the server keeps no uploads (--dataset-upload-max-gib 0); the routes answer 409.
  service::DatasetUploads* dataset_uploads = nullptr;
  RouterOptions router;
  std::function<int64_t()> now_ms;  // epoch milliseconds: token expiry, audit times
  ServerMetrics* metrics = nullptr;
  std::function<common::Status()> ready;  // /readyz: database reachable, schema current
  // host:port Prometheus scrapes this server at, for /v1/prometheus/targets; empty: the Host
  // header of the discovery request (Prometheus reached the server there).
  std::string advertise_address;
  std::string web_dir;  // the dashboard's built files (web_files.h)
  // Every connection over TLS (common/http/server_tls.h); null: plaintext.
  std::shared_ptr<const common::http::ServerTls> tls;
};

class ApiServer {
 public:
  explicit ApiServer(ApiDeps deps);
  ~ApiServer();

  // Binds host:port (port 0: any free port) and returns the bound port.
  common::Result<int> Bind(const std::string& host, int port);
  // Sets ApiDeps::advertise_address; call before Serve().
  void SetAdvertiseAddress(const std::string& host_port);
  // Serves until Stop(); call on its own thread.
  void Serve();
  // Blocks until Serve() is accepting (so that Stop() cannot be lost), up to `seconds`.
  bool WaitUntilServing(double seconds);
  void Stop();

  // Every route this server answers (method + pattern), as registered; no bind needed.
  const std::vector<Router::RouteInfo>& Routes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace controlplane::http
