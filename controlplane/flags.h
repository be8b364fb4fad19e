// embody-server's command line (docs/contracts.md) and the options it produces.
#pragma once

#include <string>
#include <vector>

#include "api/image_reference.h"
#include "api/job_spec.h"
#include "common/status.h"

namespace controlplane {

// Where the dashboard's files are: share/embody/web beside the installed binary's bin/ when
// that holds an index.html, else the build tree's web/dist.
std::string DefaultWebDir();

struct ServerOptions {
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;  // 0: any free port
  std::string advertise;  // --advertise HOST:PORT: where Prometheus scrapes this server
  // --tls-cert FILE --tls-key FILE (both or neither): the API over TLS only (docs/operations.md).
  std::string tls_cert;
  std::string tls_key;
  std::string db;       // libpq conninfo
  std::string data_dir;
  std::string port_file;      // written with the bound port
  std::string bootstrap_out;  // written (0600) with the tokens made at first start
  int heartbeat_interval_ms = 1000;
  int scheduler_period_ms = 500;
  int db_pool_size = 16;
  // PostgreSQL connections and sessions (controlplane/db/pg.h, PgOptions): how long a connect
  // may take, TCP keepalives that find a dead database host, and per-session timeouts so no
  // request waits on a statement or a lock unbounded.
  int db_connect_timeout_s = 5;
  int db_keepalives_idle_s = 30;
  int db_keepalives_interval_s = 10;
  int db_keepalives_count = 3;
  int db_statement_timeout_ms = 30'000;  // 0: none
  int db_lock_timeout_ms = 10'000;       // 0: none
  int rate_limit_per_s = 0;  // requests per second per token; 0: no limit
  int rate_limit_burst = 0;  // 0: the per-second rate
  // Audit rows of unauthenticated refusals per client address: this many at once, then one a
  // minute; the rest are counted (embody_audit_suppressed_total).
  int audit_anonymous_burst = 20;
  bool audit = true;         // an audit row per mutating call
  // 1: authenticated tokens are kept in memory, cleared on every change to tokens or tenants
  // (service/principal_cache.h, db/principal_listener.h); 0: every request reads its token in
  // a transaction of its own.
  int auth_cache = 1;
  // Group commit of POST /v1/jobs (service/submit_batcher.h): submissions arriving within the
  // window of the first are written in one transaction, at most submit_batch_max of them.
  // 0: one transaction per submission. A lone submitter's batch never waits (submit_batcher.h).
  int submit_batch_window_us = 1000;
  int submit_batch_max = 256;
  std::string web_dir = DefaultWebDir();  // the dashboard's built files
  // Where imported datasets live (<root>/tenant-<tid>/dataset-<id>), the same path on every
  // node; "" : no dataset imports.
  std::string dataset_root;
  // --image-registry NAME=URL, repeated: the only registries tenants pull images from
  // (api/image_reference.h, docs/byo.md); none: pulls are refused.
  std::vector<api::ImageRegistry> image_registries;
  // Scheduling (controlplane/service/scheduler.h).
  int preempt_min_priority = -1;  // jobs at this priority or above may preempt; -1: never
  // The highest priority members and tenant-admins may give a job where their tenant has no
  // quota.max_priority; cluster-admins are not bounded.
  int default_max_priority = 100;
  int preempt_grace_ms = 30'000;  // how long a preempted job is expected to take to exit
  int fair_share_half_life_s = 86'400;
  int max_reservations = 16;
  // Dry runs start from the scheduler's latest snapshot when it is at most this old; 0: they
  // read the jobs from the database (service/forecast_service.h).
  int forecast_snapshot_max_age_ms = 2000;
  // 1: forecasts add the learned hand-over time per job placed at an expected end
  // (service/hand_over.h); 0: slots pass to the next job at the end itself.
  int forecast_hand_over = 1;
  // While dry runs are asked, the scheduler snapshots' queues are run forward once and kept; a
  // dry run is answered against a kept run at most this old (a run of 10,000 jobs takes
  // seconds); 0: never (service/forecast_service.h).
  int forecast_plan_max_age_ms = 10'000;
  api::SpecLimits limits;
  // Checkpoint blob store (service/checkpoints_service.h).
  int checkpoint_max_mib = 16384;     // one checkpoint
  int checkpoint_quota_gib = 256;     // per tenant, uploading + stored
  int checkpoint_max_per_job = 64;    // uploading + stored
  int checkpoint_upload_ttl_s = 3600; // an upload untouched this long is removed
  // Dataset uploads (service/dataset_uploads.h), kept in <data_dir>/dataset-uploads.
  int dataset_upload_max_gib = 64;     // one upload; 0: uploads refused
  int dataset_uploads_per_tenant = 4;  // in progress at once
  int dataset_upload_ttl_s = 3600;     // untouched this long: the version fails
  // Jobs finished this many days ago lose their logs and events but state changes
  // (service/history_retention.h); 0: kept forever.
  int history_retention_days = 30;
  // Audit rows and daily usage totals older than this are deleted; 0: kept forever.
  int audit_retention_days = 365;
  int usage_retention_days = 400;
  // Running train jobs against their plan (service/plan_watch.h): the nodes' cluster description
  // (a POST /v1/plan "cluster" object in a file; "": no comparison), and how far off, for how
  // many consecutive step events, flags a job.
  std::string plan_cluster;
  int plan_deviation_percent = 150;
  int plan_deviation_steps = 5;
};

// argv without the program name. invalid_argument names the flag on any problem.
common::Result<ServerOptions> ParseServerFlags(const std::vector<std::string>& args);
std::string ServerUsage();

}  // namespace controlplane
