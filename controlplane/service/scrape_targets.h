// Prometheus HTTP service discovery (http_sd_configs): the targets Prometheus should scrape,
// served at GET /v1/prometheus/targets in Prometheus' format
//   [{"targets": ["host:port"], "labels": {"role": "server"}},
//    {"targets": ["host:port"], "labels": {"role": "agent", "node": "node-a", "node_id": "1"}}]
// The server comes first, then one group per UP node whose agent registered a usable URL
// (http:// or https://, host and port), ordered by node id. An https agent also gets the label
// __scheme__="https". DOWN nodes are left out: the alert on them is embody_nodes{state="DOWN"}.
// deploy/prometheus.yml splits the groups into its two scrape jobs by `role`.
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

// `server_address` is host:port of this server's /metrics.
nlohmann::json ScrapeTargets(const std::string& server_address,
                             const std::vector<NodeRecord>& nodes);

}  // namespace controlplane::service
