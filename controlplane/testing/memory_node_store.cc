// The twin's nodes, mirroring controlplane/db/node_store.cc: an upsert by name that keeps the
// id and the draining flag, reads by id order.
#include "controlplane/testing/memory_tables.h"

namespace controlplane::testing {

using common::Result;
using common::Status;
using service::NodeRecord;

Result<int64_t> MemoryNodeStore::Upsert(const api::RegisterRequest& r, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  for (const std::string* s : {&r.name, &r.address, &r.agent_url}) {
    EMBODY_RETURN_IF_ERROR(tx_.Text(*s));
  }
  nlohmann::json wire = api::ToJson(r);
  EMBODY_ASSIGN_OR_RETURN(gpus, tx_.Jsonb(wire["gpus"]));
  EMBODY_ASSIGN_OR_RETURN(isolation, tx_.Jsonb(wire["isolation"]));
  const int64_t fresh_id = ++tx_.seq.nodes;  // nextval runs before the conflict is seen
  auto& nodes = tx_.tables.nodes.mut();
  NodeRecord* node = nullptr;
  for (auto& [id, n] : nodes) {
    if (n.name == r.name) node = &n;
  }
  if (!node) {
    node = &nodes[fresh_id];
    node->id = fresh_id;
    node->name = r.name;
    node->draining = false;
  }
  node->address = r.address;
  node->agent_url = r.agent_url;
  node->cpu_slots = r.cpu_slots;
  node->memory_bytes = r.memory_bytes;
  node->gpus = std::move(gpus);
  node->isolation = std::move(isolation);
  node->last_heartbeat_ms = now_ms;
  node->state = "UP";
  return node->id;
}

Result<std::optional<NodeRecord>> MemoryNodeStore::Get(int64_t id) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  const auto& nodes = tx_.tables.nodes.get();
  auto it = nodes.find(id);
  if (it == nodes.end()) return std::optional<NodeRecord>();
  return std::optional<NodeRecord>(it->second);
}

Result<std::optional<NodeRecord>> MemoryNodeStore::GetByName(const std::string& name) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(name));
  for (const auto& [id, n] : tx_.tables.nodes.get()) {
    if (n.name == name) return std::optional<NodeRecord>(n);
  }
  return std::optional<NodeRecord>();
}

Status MemoryNodeStore::SetDraining(int64_t id, bool draining) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (tx_.tables.nodes.get().count(id) == 0) return Status::Ok();
  tx_.tables.nodes.mut().at(id).draining = draining;
  return Status::Ok();
}

Result<std::vector<NodeRecord>> MemoryNodeStore::List() {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::vector<NodeRecord> out;
  for (const auto& [id, n] : tx_.tables.nodes.get()) out.push_back(n);
  return out;
}

Result<std::vector<service::NodeShape>> MemoryNodeStore::Shapes() {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  std::map<std::pair<int, int>, int64_t> counts;  // (cpu slots, gpus) in the order SQL sorts
  for (const auto& [id, n] : tx_.tables.nodes.get()) {
    ++counts[{n.cpu_slots, n.gpus.is_array() ? static_cast<int>(n.gpus.size()) : 0}];
  }
  std::vector<service::NodeShape> out;
  for (const auto& [shape, n] : counts) out.push_back({shape.first, shape.second, n});
  return out;
}

Status MemoryNodeStore::Touch(int64_t id, int64_t now_ms) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  if (tx_.tables.nodes.get().count(id) == 0) return Status::Ok();
  NodeRecord& n = tx_.tables.nodes.mut().at(id);
  n.last_heartbeat_ms = now_ms;
  n.state = "UP";
  return Status::Ok();
}

Status MemoryNodeStore::SetState(int64_t id, const std::string& state) {
  EMBODY_RETURN_IF_ERROR(tx_.Usable());
  EMBODY_RETURN_IF_ERROR(tx_.Text(state));
  if (tx_.tables.nodes.get().count(id) == 0) return Status::Ok();
  tx_.tables.nodes.mut().at(id).state = state;
  return Status::Ok();
}

}  // namespace controlplane::testing
