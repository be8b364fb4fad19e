// Agent::Impl, the agent's parts (agent/agent.h): made in agent_prepare.cc from the options, started
// and stopped in agent.cc. Private to those two files.
#pragma once

#include "agent/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "agent/node/agent_metrics.h"
#include "agent/data/checkpoint_uploader.h"
#include "agent/jobs/job_binaries.h"
#include "agent/data/dataset_import.h"
#include "agent/heartbeat/event_queue.h"
#include "agent/node/gpu_collector.h"
#include "agent/node/gpu_pool.h"
#include "agent/heartbeat/heartbeat_loop.h"
#include "agent/jobs/job_runner.h"
#include "agent/jobs/job_sandbox_options.h"
#include "agent/local_api/local_api.h"
#include "agent/launch/mpi_launch.h"
#include "agent/node/node_collector.h"
#include "agent/heartbeat/node_credential.h"
#include "agent/node/node_probe.h"
#include "agent/node/nvml_probe.h"
#include "agent/jobs/rank_logs.h"
#include "agent/rsh/rsh_bridge.h"
#include "agent/sandbox/job_network.h"
#include "agent/sandbox/sandbox.h"
#include "agent/heartbeat/server_client.h"
#include "common/crypto.h"
#include "common/file_util.h"
#include "common/http/client.h"
#include "common/http/server_tls.h"
#include "common/log.h"
#include "storage/checkpoint_http_store.h"

namespace agent {

// Where jobs on this node reach the local API, and where other nodes do.
std::string LocalHost(const AgentOptions& cfg);
std::string PublicHost(const AgentOptions& cfg);
// A host as a URL writes it: an IPv6 address in brackets.
std::string UrlHost(const std::string& host);

// Members are destroyed bottom-up: what calls into another part is declared after it.
struct Agent::Impl {
  enum class State { kCreated, kStarted, kStopped };

  AgentOptions options;
  // The one copy of the job sandbox settings; the runner and the rsh bridge get it as is.
  JobSandboxOptions jobs;
  bool cgroups_torn_down = false;
  api::NodeIsolation isolation;
  NodeResources node;
  std::unique_ptr<NodeCredential> credential;
  // The local API's TLS (--tls-cert); null: plaintext.
  std::shared_ptr<const common::http::ServerTls> tls;
  std::string ca_file;  // --ca-file, absolute
  // Kept open for the agent's life: the GPU series are read from it at every scrape.
  std::unique_ptr<Nvml> nvml;
  EventQueue events;
  RankLogs logs;
  std::atomic<JobRunner*> runner_ptr{nullptr};
  NodeCollector node_collector;
  std::unique_ptr<JobProcessCollector> job_collector;
  std::unique_ptr<GpuCollector> gpu_collector;
  AgentMetrics metrics;
  // One uid pool and one GPU pool for the jobs this node heads and the daemons it runs for jobs
  // headed elsewhere.
  std::unique_ptr<UidPool> uid_pool;
  std::shared_ptr<GpuPool> gpu_pool;
  // What jobs' uids may reach on the network (--job-network); null: the node's whole network.
  // Before the bridge and the runner, which grant and revoke while jobs run.
  std::unique_ptr<JobNetwork> network;
  // Before the bridge and the runner, which hold entries of it while jobs run.
  std::unique_ptr<ImageCache> images;
  std::string container_init;  // embody-container-init, PID 1 of image jobs' containers
  std::unique_ptr<RshBridge> bridge;
  int max_rsh_streams = 0;  // the bridge's daemons at once, each holding one local API thread
  std::unique_ptr<storage::HttpCheckpointStore> checkpoint_store;
  std::unique_ptr<CheckpointUploader> uploader;
  std::unique_ptr<LocalApi> local_api;
  std::unique_ptr<JobRunner> runner;
  std::unique_ptr<HttpServerChannel> channel;
  std::unique_ptr<HeartbeatLoop> loop;
  std::thread heartbeats;
  std::mutex retention_mu;
  std::condition_variable retention_cv;
  bool retention_stop = false;
  std::thread retention;
  int port = 0;
  std::string local_url;
  std::string embody_data;  // the embody-data import jobs run (job_binaries.h)
  State state = State::kCreated;

  common::Status Prepare();
  common::Status PrepareTls();
  common::Status PrepareJobNetwork();
  common::Status StartParts();
  void StopParts();
};

}  // namespace agent
