// A node as the API shows it (GET /v1/nodes, POST /v1/nodes/{id}/drain, /undrain, /reset) and
// the nodes listing; schemas Node, Gpu, NodeIsolation and NodeList of docs/api/openapi.yaml.
// What an agent sends about its node is the agent protocol's (api/agent_protocol.h), not this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace api::v1 {

struct Gpu {
  int index = 0;
  std::string name;  // absent on the wire: ""
  int64_t memory_bytes = 0;  // absent on the wire: 0
  bool operator==(const Gpu&) const = default;
};

// How the node keeps jobs apart from its agent and from each other.
struct NodeIsolation {
  bool unprivileged_uid = false;
  std::string cgroup = "none";  // "v2", "v1" or "none"
  bool rlimits = false;
  bool operator==(const NodeIsolation&) const = default;
};

struct Node {
  int64_t id = 0;
  std::string name;
  std::string address;
  std::string agent_url;
  std::string state;  // "UP" or "DOWN"
  int cpu_slots = 0;
  std::vector<Gpu> gpus;
  int64_t memory_bytes = 0;
  int slots_used = 0;
  bool draining = false;
  // nullopt: the agent never said (a node registered before agents did): {} on the wire.
  std::optional<NodeIsolation> isolation;
  int64_t last_heartbeat_ms = 0;
  bool operator==(const Node&) const = default;
};

struct NodeList {
  std::vector<Node> nodes;
  bool operator==(const NodeList&) const = default;
};

nlohmann::json ToJson(const Node& n);
nlohmann::json ToJson(const NodeList& l);
// Each refuses a field of the wrong type or a missing required one, naming it.
common::Result<Node> ParseNode(const nlohmann::json& j);
common::Result<NodeList> ParseNodeList(const nlohmann::json& j);
// The gpus and isolation of a node as stored (the agent protocol's JSON of them): what the
// server reads back from its store to build a Node.
common::Result<std::vector<Gpu>> ParseGpus(const nlohmann::json& j);
common::Result<std::optional<NodeIsolation>> ParseNodeIsolation(const nlohmann::json& j);

}  // namespace api::v1
