// Prometheus HTTP service discovery (http_sd_configs): the targets Prometheus should scrape,
// served at GET /v1/prometheus/targets in Prometheus' format
//   [{"targets": ["host:port"], "labels": {"role": "server"}},
//    {"targets": ["host:port"], "labels": {"role": "agent", "node": "node-a", "node_id": "1"}},
//    {"targets": ["host:port"], "labels": {"role": "job", "job": "42", "tenant": "acme",
//                                          "node": "node-a", "node_id": "1",
//                                          "__metrics_path__": "/metrics/jobs/42"}}]
// The server comes first, then for each UP node whose agent registered a usable URL (http:// or
// https://, host and port), ordered by node id, the node's group and one group per running job
// placed there, ordered by job id. An https agent's groups also get __scheme__="https". DOWN nodes
// are left out: the alert on them is embody_nodes{state="DOWN"}. deploy/prometheus.yml splits the
// groups into its scrape jobs by `role`.
//
// Every label that says which node, job or tenant a series belongs to comes from here, from the
// server's own records, and the scrape config does not honour labels a target exports: a node
// can set the values of its own series and of the jobs placed on it, never claim to be another
// node or to run another tenant's job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controlplane/service/store.h"

namespace controlplane::service {

struct AgentEndpoint {
  std::string scheme;   // "http" | "https"
  std::string address;  // "host:port" as Prometheus wants it
};

// nullopt unless `url` is http(s)://HOST:PORT with an optional path.
std::optional<AgentEndpoint> ParseAgentUrl(const std::string& url);

// A running job's part on one node.
struct JobPlacement {
  int64_t job_id = 0;
  std::string tenant;
  int64_t node_id = 0;
};

// `server_address` is host:port of this server's /metrics.
// `server_tls`: the server serves TLS (its group gets __scheme__="https").
nlohmann::json ScrapeTargets(const std::string& server_address,
                             const std::vector<NodeRecord>& nodes,
                             std::vector<JobPlacement> jobs = {}, bool server_tls = false);

}  // namespace controlplane::service
