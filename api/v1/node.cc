#include "api/v1/node.h"

#include "api/v1/json_fields.h"
#include "common/time_util.h"

namespace api::v1 {

using nlohmann::json;

namespace {

Gpu ReadGpu(FieldReader& r) {
  Gpu g;
  g.index = r.Int32("index");
  g.name = r.OptionalString("name").value_or("");
  g.memory_bytes = r.OptionalInt("memory_bytes").value_or(0);
  return g;
}

// {} is "not said"; any other object names what it has, the rest at its default.
std::optional<NodeIsolation> ReadIsolation(FieldReader& r, const json& j) {
  if (j.is_object() && j.empty()) return std::nullopt;
  NodeIsolation iso;
  iso.unprivileged_uid = r.OptionalBool("unprivileged_uid").value_or(false);
  iso.cgroup = r.OptionalString("cgroup").value_or("none");
  iso.rlimits = r.OptionalBool("rlimits").value_or(false);
  return iso;
}

Node ReadNode(FieldReader& r) {
  Node n;
  n.id = r.Int("id");
  n.name = r.String("name");
  n.address = r.String("address");
  n.agent_url = r.String("agent_url");
  n.state = r.String("state");
  n.cpu_slots = r.Int32("cpu_slots");
  n.gpus = ReadArray<Gpu>(r, "gpus", ReadGpu);
  n.memory_bytes = r.Int("memory_bytes");
  n.slots_used = r.Int32("slots_used");
  n.draining = r.Bool("draining");
  if (const json* iso = r.Object("isolation")) {
    FieldReader nested(*iso, r.PathOf("isolation"));
    n.isolation = ReadIsolation(nested, *iso);
    r.Note(nested.status());
  }
  n.last_heartbeat_ms = r.Time("last_heartbeat");
  return n;
}

json IsolationJson(const std::optional<NodeIsolation>& iso) {
  if (!iso) return json::object();
  return {{"unprivileged_uid", iso->unprivileged_uid},
          {"cgroup", iso->cgroup},
          {"rlimits", iso->rlimits}};
}

}  // namespace

json ToJson(const Node& n) {
  json gpus = json::array();
  for (const Gpu& g : n.gpus) {
    gpus.push_back({{"index", g.index}, {"name", g.name}, {"memory_bytes", g.memory_bytes}});
  }
  return {{"id", n.id},
          {"name", n.name},
          {"address", n.address},
          {"agent_url", n.agent_url},
          {"state", n.state},
          {"cpu_slots", n.cpu_slots},
          {"gpus", std::move(gpus)},
          {"memory_bytes", n.memory_bytes},
          {"slots_used", n.slots_used},
          {"draining", n.draining},
          {"isolation", IsolationJson(n.isolation)},
          {"last_heartbeat", common::FormatTimeMillis(n.last_heartbeat_ms)}};
}

json ToJson(const NodeList& l) {
  json nodes = json::array();
  for (const Node& n : l.nodes) nodes.push_back(ToJson(n));
  return {{"nodes", std::move(nodes)}};
}

common::Result<Node> ParseNode(const json& j) { return ReadDocument<Node>(j, ReadNode); }

common::Result<NodeList> ParseNodeList(const json& j) {
  return ReadDocument<NodeList>(
      j, [](FieldReader& r) { return NodeList{ReadArray<Node>(r, "nodes", ReadNode)}; });
}

common::Result<std::vector<Gpu>> ParseGpus(const json& j) {
  // Read as the member of an object, so each element gets its path ("gpus[1].index").
  const json holder{{"gpus", j}};
  return ReadDocument<std::vector<Gpu>>(
      holder, [](FieldReader& r) { return ReadArray<Gpu>(r, "gpus", ReadGpu); });
}

common::Result<std::optional<NodeIsolation>> ParseNodeIsolation(const json& j) {
  FieldReader r(j, "isolation");
  std::optional<NodeIsolation> iso = ReadIsolation(r, j);
  if (!r.status().ok()) return r.status();
  return iso;
}

}  // namespace api::v1
