#include "api/agent_protocol.h"

#include <limits>
#include <stdexcept>

#include "common/parse_int.h"

namespace api {

using common::InvalidArgument;
using common::Result;
using common::Status;
using nlohmann::json;

namespace {

// Every integer an agent sends is read through these. nlohmann's get<int>() casts a float
// (undefined behaviour out of range: 1e30) and wraps a large unsigned into a negative number;
// here anything but an integer in T's range is refused (the parsers turn the exception into
// invalid_argument).
template <typename T>
T IntOf(const json& v) {
  if (!v.is_number_integer()) {
    throw std::invalid_argument(std::string("expected an integer, got ") + v.type_name());
  }
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      throw std::out_of_range("integer out of range: " + v.dump());
    }
    return static_cast<T>(v.get<uint64_t>());
  }
  const int64_t x = v.get<int64_t>();
  if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
    throw std::out_of_range("integer out of range: " + v.dump());
  }
  return static_cast<T>(x);
}

template <typename T>
T IntOr(const json& obj, const char* key, T fallback) {
  return obj.contains(key) ? IntOf<T>(obj.at(key)) : fallback;
}


// The timings in the order they are reached, with their wire names.
struct TimingField {
  const char* name;
  int64_t LaunchTimings::*field;
};
constexpr TimingField kTimingFields[] = {
    {"sandbox_prepared_ms", &LaunchTimings::sandbox_prepared_ms},
    {"process_started_ms", &LaunchTimings::process_started_ms},
    {"exited_ms", &LaunchTimings::exited_ms},
    {"slot_freed_ms", &LaunchTimings::slot_freed_ms},
    {"reported_ms", &LaunchTimings::reported_ms}};

json TimingsJson(const LaunchTimings& t) {
  json j = json::object();
  for (const TimingField& f : kTimingFields) {
    if (t.*f.field >= 0) j[f.name] = t.*f.field;
  }
  return j;
}

// Lenient, unlike the rest of a heartbeat: timings that are not integers in range, or that go
// backwards, are dropped whole and the report stands (they say where time went, nothing more).
LaunchTimings ParseTimings(const json& j) {
  LaunchTimings t;
  if (!j.is_object()) return t;
  int64_t last = 0;
  for (const TimingField& f : kTimingFields) {
    auto it = j.find(f.name);
    if (it == j.end()) continue;
    if (!it->is_number_integer() ||
        (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{kMaxLaunchTimingMs})) {
      return LaunchTimings{};
    }
    const int64_t v = it->get<int64_t>();
    if (v < last || v > kMaxLaunchTimingMs) return LaunchTimings{};
    t.*f.field = last = v;
  }
  return t;
}

}  // namespace

json ToJson(const RegisterRequest& r) {
  json gpus = json::array();
  for (const auto& g : r.gpus) {
    gpus.push_back({{"index", g.index}, {"name", g.name}, {"memory_bytes", g.memory_bytes}});
  }
  return {{"name", r.name},           {"address", r.address},
          {"agent_url", r.agent_url}, {"cpu_slots", r.cpu_slots},
          {"memory_bytes", r.memory_bytes}, {"gpus", gpus},
          {"isolation",
           {{"unprivileged_uid", r.isolation.unprivileged_uid},
            {"cgroup", r.isolation.cgroup},
            {"rlimits", r.isolation.rlimits}}}};
}

json ToJson(const RegisterResponse& r) {
  json j{{"node_id", r.node_id}, {"heartbeat_interval_ms", r.heartbeat_interval_ms}};
  if (!r.node_token.empty()) j["node_token"] = r.node_token;
  return j;
}

json ToJson(const HeartbeatRequest& r) {
  json j;
  j["running"] = r.running;
  if (r.wait_ms > 0) j["wait_ms"] = r.wait_ms;
  if (r.has_launched) {
    j["launched"] = json::array();
    for (const auto& l : r.launched) {
      j["launched"].push_back({{"job_id", l.job_id}, {"attempt", l.attempt}});
    }
  }
  if (r.has_workers) {
    j["workers"] = json::array();
    for (const auto& w : r.workers) {
      j["workers"].push_back({{"job_id", w.job_id}, {"attempt", w.attempt}});
    }
  }
  j["finished"] = json::array();
  for (const auto& f : r.finished) {
    j["finished"].push_back({{"job_id", f.job_id},
                             {"exit_code", f.exit_code},
                             {"reason", f.reason},
                             {"killed", f.killed}});
    if (f.lost) j["finished"].back()["lost"] = true;
    if (f.attempt >= 0) j["finished"].back()["attempt"] = f.attempt;
    if (!f.timings.Empty()) j["finished"].back()["timings"] = TimingsJson(f.timings);
  }
  j["events"] = json::array();
  for (const auto& e : r.events) {
    j["events"].push_back(
        {{"job_id", e.job_id}, {"time_ms", e.time_ms}, {"type", e.type}, {"data", e.data}});
  }
  j["logs"] = json::array();
  for (const auto& l : r.logs) {
    j["logs"].push_back(
        {{"job_id", l.job_id}, {"rank", l.rank}, {"offset", l.offset}, {"data", l.data}});
    if (l.attempt >= 0) j["logs"].back()["attempt"] = l.attempt;
  }
  return j;
}

json ToJson(const HeartbeatResponse& r) {
  json cmds = json::array();
  for (const auto& c : r.commands) {
    const char* type = c.type == Command::Type::kLaunch   ? "launch"
                       : c.type == Command::Type::kWorker ? "worker"
                                                          : "kill";
    json j{{"type", type}, {"job_id", c.job_id}};
    if (c.type == Command::Type::kWorker && c.held) {
      j["attempt"] = c.attempt;
      j["held"] = true;
    } else if (c.type == Command::Type::kWorker) {
      j["tenant_id"] = c.tenant_id;
      j["tenant"] = c.tenant;
      j["attempt"] = c.attempt;
      j["spec"] = c.spec;
      j["job_token_sha256"] = c.job_token_sha256;
      if (!c.peers.empty()) j["peers"] = c.peers;
      j["hosts"] = json::array();
      for (const auto& h : c.hosts) {
        j["hosts"].push_back({{"node_id", h.node_id}, {"name", h.name}, {"address", h.address},
                              {"ranks", h.ranks}, {"agent_url", h.agent_url}});
      }
      if (!c.log_bytes.empty()) {
        json bytes = json::object();
        for (const auto& [rank, n] : c.log_bytes) bytes[std::to_string(rank)] = n;
        j["log_bytes"] = bytes;
      }
    }
    if (c.type == Command::Type::kLaunch) {
      if (!c.job_token.empty()) j["job_token"] = c.job_token;
      j["tenant_id"] = c.tenant_id;
      j["tenant"] = c.tenant;
      j["attempt"] = c.attempt;
      j["spec"] = c.spec;
      if (!c.resume_from.empty()) j["resume_from"] = c.resume_from;
      if (c.resume_checkpoint.id != 0) {
        const CheckpointRef& r = c.resume_checkpoint;
        j["resume_checkpoint"] = {{"id", r.id},
                                  {"job_id", r.job_id},
                                  {"step", r.step},
                                  {"bytes", r.bytes},
                                  {"sha256", r.sha256}};
      }
      if (!c.log_bytes.empty()) {
        json bytes = json::object();
        for (const auto& [rank, n] : c.log_bytes) bytes[std::to_string(rank)] = n;
        j["log_bytes"] = bytes;
      }
      j["hosts"] = json::array();
      for (const auto& h : c.hosts) {
        j["hosts"].push_back(
            {{"node_id", h.node_id}, {"name", h.name}, {"address", h.address}, {"ranks", h.ranks},
             {"agent_url", h.agent_url}});
      }
    }
    cmds.push_back(std::move(j));
  }
  json out{{"commands", cmds}};
  if (!r.deferred.empty()) out["deferred"] = r.deferred;
  return out;
}

// The parsers below turn nlohmann's type errors into invalid_argument at this edge.
Result<RegisterRequest> ParseRegisterRequest(const json& j) {
  try {
    RegisterRequest r;
    r.name = j.at("name").get<std::string>();
    r.address = j.at("address").get<std::string>();
    r.agent_url = j.value("agent_url", "");
    r.cpu_slots = IntOf<int>(j.at("cpu_slots"));
    r.memory_bytes = IntOr<int64_t>(j, "memory_bytes", 0);
    for (const auto& g : j.value("gpus", json::array())) {
      r.gpus.push_back(
          {IntOf<int>(g.at("index")), g.value("name", ""), IntOr<int64_t>(g, "memory_bytes", 0)});
    }
    if (j.contains("isolation")) {
      const json& iso = j.at("isolation");
      r.isolation.unprivileged_uid = iso.value("unprivileged_uid", false);
      r.isolation.cgroup = iso.value("cgroup", "none");
      r.isolation.rlimits = iso.value("rlimits", false);
      if (r.isolation.cgroup != "v2" && r.isolation.cgroup != "v1" &&
          r.isolation.cgroup != "none") {
        return InvalidArgument("must be v2, v1 or none", "isolation.cgroup");
      }
    }
    if (r.gpus.size() > 1024) return InvalidArgument("too many GPUs", "gpus");
    if (r.address.empty() || r.address.size() > 255) {
      return InvalidArgument("must be 1-255 characters", "address");
    }
    if (r.agent_url.size() > 1024) return InvalidArgument("too long", "agent_url");
    if (r.name.empty() || r.name.size() > 128) return InvalidArgument("bad node name", "name");
    if (r.cpu_slots < 0) return InvalidArgument("must be >= 0", "cpu_slots");
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("bad register request: ") + e.what());
  }
}

Result<RegisterResponse> ParseRegisterResponse(const json& j) {
  try {
    RegisterResponse r;
    r.node_id = j.at("node_id").get<int64_t>();
    r.heartbeat_interval_ms = j.value("heartbeat_interval_ms", 1000);
    r.node_token = j.value("node_token", "");
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("bad register response: ") + e.what());
  }
}

Result<HeartbeatRequest> ParseHeartbeatRequest(const json& j) {
  try {
    HeartbeatRequest r;
    for (const auto& id : j.value("running", json::array())) {
      r.running.push_back(IntOf<int64_t>(id));
    }
    if (j.contains("launched")) {
      r.has_launched = true;
      for (const auto& l : j.at("launched")) {
        r.launched.push_back({IntOf<int64_t>(l.at("job_id")), IntOf<int>(l.at("attempt"))});
      }
    }
    if (j.contains("workers")) {
      r.has_workers = true;
      for (const auto& w : j.at("workers")) {
        r.workers.push_back({IntOf<int64_t>(w.at("job_id")), IntOf<int>(w.at("attempt"))});
      }
    }
    for (const auto& f : j.value("finished", json::array())) {
      FinishedJob done{IntOf<int64_t>(f.at("job_id")), IntOf<int>(f.at("exit_code")),
                       f.value("reason", "")};
      if (f.contains("killed")) done.killed = f.at("killed").get<bool>();
      if (f.contains("lost")) done.lost = f.at("lost").get<bool>();
      if (f.contains("attempt")) done.attempt = IntOf<int>(f.at("attempt"));
      if (f.contains("timings")) done.timings = ParseTimings(f.at("timings"));
      r.finished.push_back(std::move(done));
    }
    for (const auto& e : j.value("events", json::array())) {
      r.events.push_back({IntOf<int64_t>(e.at("job_id")), IntOr<int64_t>(e, "time_ms", 0),
                          e.at("type").get<std::string>(), e.value("data", json::object())});
    }
    for (const auto& l : j.value("logs", json::array())) {
      r.logs.push_back({IntOf<int64_t>(l.at("job_id")), IntOf<int>(l.at("rank")),
                        IntOf<int64_t>(l.at("offset")), l.at("data").get<std::string>(),
                        IntOr<int>(l, "attempt", -1)});
    }
    r.wait_ms = IntOr<int>(j, "wait_ms", 0);
    if (r.wait_ms < 0 || r.wait_ms > kMaxHeartbeatWaitMs) {
      return InvalidArgument("must be 0.." + std::to_string(kMaxHeartbeatWaitMs), "wait_ms");
    }
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("bad heartbeat: ") + e.what());
  }
}

namespace {

Status ParseLogBytes(const json& c, Command* cmd) {
  if (!c.contains("log_bytes")) return Status::Ok();
  for (const auto& [rank, n] : c.at("log_bytes").items()) {
    auto r = common::ParseInt(rank, -1, std::numeric_limits<int>::max());
    if (!r.ok() || !n.is_number_integer() || n.get<int64_t>() < 0) {
      return InvalidArgument("bad log_bytes", "log_bytes");
    }
    cmd->log_bytes[*r] = n.get<int64_t>();
  }
  return Status::Ok();
}

}  // namespace

Result<HeartbeatResponse> ParseHeartbeatResponse(const json& j) {
  try {
    HeartbeatResponse r;
    for (const auto& c : j.at("commands")) {
      Command cmd;
      std::string type = c.at("type").get<std::string>();
      cmd.job_id = c.at("job_id").get<int64_t>();
      if (type == "launch") {
        cmd.type = Command::Type::kLaunch;
        cmd.tenant_id = c.value("tenant_id", int64_t{0});
        cmd.tenant = c.value("tenant", "");
        cmd.attempt = c.value("attempt", 0);
        cmd.spec = c.at("spec");
        cmd.resume_from = c.value("resume_from", "");
        if (c.contains("resume_checkpoint")) {
          const json& r = c.at("resume_checkpoint");
          cmd.resume_checkpoint = {r.at("id").get<int64_t>(), r.at("job_id").get<int64_t>(),
                                   r.at("step").get<int64_t>(), r.at("bytes").get<int64_t>(),
                                   r.at("sha256").get<std::string>()};
          if (cmd.resume_checkpoint.id <= 0 || cmd.resume_checkpoint.job_id <= 0 ||
              cmd.resume_checkpoint.step < 0 || cmd.resume_checkpoint.bytes < 0) {
            return InvalidArgument("bad resume_checkpoint", "resume_checkpoint");
          }
        }
        EMBODY_RETURN_IF_ERROR(ParseLogBytes(c, &cmd));
        cmd.job_token = c.value("job_token", "");
        for (const auto& h : c.at("hosts")) {
          cmd.hosts.push_back({h.at("node_id").get<int64_t>(), h.value("name", ""),
                               h.at("address").get<std::string>(), h.at("ranks").get<int>(),
                               h.value("agent_url", "")});
        }
      } else if (type == "worker" && c.value("held", false)) {
        cmd.type = Command::Type::kWorker;
        cmd.held = true;
        cmd.attempt = c.at("attempt").get<int>();
      } else if (type == "worker") {
        cmd.type = Command::Type::kWorker;
        cmd.tenant_id = c.at("tenant_id").get<int64_t>();
        cmd.tenant = c.value("tenant", "");
        cmd.attempt = c.at("attempt").get<int>();
        cmd.spec = c.at("spec");
        cmd.job_token_sha256 = c.at("job_token_sha256").get<std::string>();
        cmd.peers = c.value("peers", std::vector<std::string>{});
        for (const auto& h : c.value("hosts", json::array())) {
          cmd.hosts.push_back({h.at("node_id").get<int64_t>(), h.value("name", ""),
                               h.at("address").get<std::string>(), h.at("ranks").get<int>(),
                               h.value("agent_url", "")});
        }
        EMBODY_RETURN_IF_ERROR(ParseLogBytes(c, &cmd));
      } else if (type == "kill") {
        cmd.type = Command::Type::kKill;
      } else {
        continue;  // commands from a newer server that this agent does not know
      }
      r.commands.push_back(std::move(cmd));
    }
    for (const auto& id : j.value("deferred", json::array())) r.deferred.push_back(IntOf<int64_t>(id));
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("bad heartbeat response: ") + e.what());
  }
}

bool LaunchTimings::Empty() const {
  for (const TimingField& f : kTimingFields) {
    if (this->*f.field >= 0) return false;
  }
  return true;
}

}  // namespace api
