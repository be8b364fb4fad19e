#include "controlplane/service/scrape_targets.h"

#include <algorithm>
#include <tuple>

namespace controlplane::service {

using nlohmann::json;

std::optional<AgentEndpoint> ParseAgentUrl(const std::string& url) {
  AgentEndpoint e;
  std::string rest;
  for (const char* scheme : {"http", "https"}) {
    const std::string prefix = std::string(scheme) + "://";
    if (url.compare(0, prefix.size(), prefix) == 0) {
      e.scheme = scheme;
      rest = url.substr(prefix.size());
    }
  }
  if (e.scheme.empty()) return std::nullopt;
  e.address = rest.substr(0, rest.find('/'));
  const size_t colon = e.address.rfind(':');
  // A bracketed IPv6 literal keeps its colons inside the brackets.
  if (colon == std::string::npos || colon == 0 || colon + 1 == e.address.size() ||
      e.address.find(']', colon) != std::string::npos) {
    return std::nullopt;
  }
  for (size_t i = colon + 1; i < e.address.size(); ++i) {
    if (e.address[i] < '0' || e.address[i] > '9') return std::nullopt;
  }
  for (char c : e.address) {
    if (c == '@' || c == ' ' || c == '?' || c == '#') return std::nullopt;  // not host:port
  }
  return e;
}

json ScrapeTargets(const std::string& server_address, const std::vector<NodeRecord>& nodes,
                   std::vector<JobPlacement> jobs, bool server_tls) {
  std::sort(jobs.begin(), jobs.end(), [](const JobPlacement& a, const JobPlacement& b) {
    return std::tie(a.node_id, a.job_id) < std::tie(b.node_id, b.job_id);
  });
  std::vector<const NodeRecord*> up;
  for (const NodeRecord& n : nodes) up.push_back(&n);
  std::sort(up.begin(), up.end(),
            [](const NodeRecord* a, const NodeRecord* b) { return a->id < b->id; });
  json out = json::array();
  json server_labels = {{"role", "server"}};
  if (server_tls) server_labels["__scheme__"] = "https";
  out.push_back({{"targets", {server_address}}, {"labels", server_labels}});
  for (const NodeRecord* n : up) {
    if (n->state != "UP") continue;
    auto endpoint = ParseAgentUrl(n->agent_url);
    if (!endpoint) continue;
    json labels = {{"role", "agent"}, {"node", n->name}, {"node_id", std::to_string(n->id)}};
    if (endpoint->scheme == "https") labels["__scheme__"] = "https";
    out.push_back({{"targets", {endpoint->address}}, {"labels", labels}});
    auto first = std::lower_bound(jobs.begin(), jobs.end(), n->id,
                                  [](const JobPlacement& j, int64_t id) { return j.node_id < id; });
    for (auto j = first; j != jobs.end() && j->node_id == n->id; ++j) {
      json job_labels = labels;
      job_labels["role"] = "job";
      job_labels["job"] = std::to_string(j->job_id);
      job_labels["tenant"] = j->tenant;
      job_labels["__metrics_path__"] = "/metrics/jobs/" + std::to_string(j->job_id);
      out.push_back({{"targets", {endpoint->address}}, {"labels", job_labels}});
    }
  }
  return out;
}

}  // namespace controlplane::service
