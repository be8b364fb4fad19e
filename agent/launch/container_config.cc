#include "agent/launch/container_config.h"

#include <sys/stat.h>

namespace agent {
namespace {

using nlohmann::json;

bool CleanAbsolute(const std::string& p) {
  if (p.empty() || p[0] != '/' || p.size() > 4096) return false;
  for (char c : p) {
    if (static_cast<unsigned char>(c) < 0x20) return false;
  }
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

json Bind(const std::string& path, bool read_only) {
  return json{{"destination", path},
              {"type", "bind"},
              {"source", path},
              {"options", {"rbind", read_only ? "ro" : "rw", "nosuid", "nodev"}}};
}

bool Exists(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0;
}

}  // namespace

json ToJson(const ContainerPlan& plan) {
  json binds = json::array();
  for (const auto& b : plan.binds) {
    binds.push_back({{"path", b.path}, {"read_only", b.read_only}, {"file", b.is_file}});
  }
  return json{{"rootfs", plan.rootfs}, {"init", plan.init}, {"crun", plan.crun}, {"binds", binds}};
}

common::Result<ContainerPlan> ParseContainerPlan(const json& j) {
  if (!j.is_object()) return common::InvalidArgument("container must be an object", "container");
  ContainerPlan plan;
  for (const char* key : {"rootfs", "init", "crun"}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return common::InvalidArgument(std::string("container.") + key + " must be a string");
    }
  }
  plan.rootfs = j["rootfs"].get<std::string>();
  plan.init = j["init"].get<std::string>();
  plan.crun = j["crun"].get<std::string>();
  if (!CleanAbsolute(plan.rootfs) || !CleanAbsolute(plan.init) || plan.crun.empty()) {
    return common::InvalidArgument("container paths must be absolute, without \"..\"");
  }
  if (!j.contains("binds") || !j["binds"].is_array()) {
    return common::InvalidArgument("container.binds must be an array");
  }
  for (const auto& b : j["binds"]) {
    if (!b.is_object() || !b.contains("path") || !b["path"].is_string() ||
        !CleanAbsolute(b["path"].get<std::string>()) || b["path"] == "/" ||
        !b.contains("read_only") || !b["read_only"].is_boolean() ||
        (b.contains("file") && !b["file"].is_boolean())) {
      return common::InvalidArgument("bad container bind " + b.dump());
    }
    plan.binds.push_back({b["path"].get<std::string>(), b["read_only"].get<bool>(),
                          b.value("file", false)});
  }
  return plan;
}

json OciRuntimeConfig(const ContainerPlan& plan, const ContainerProcess& process) {
  std::vector<std::string> args{plan.init, "--"};
  args.insert(args.end(), process.args.begin(), process.args.end());
  const json no_caps = json::array();
  json mounts = json::array({
      {{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"},
       {"options", {"nosuid", "noexec", "nodev"}}},
      {{"destination", "/dev"}, {"type", "tmpfs"}, {"source", "tmpfs"},
       {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
      {{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"},
       {"options", {"nosuid", "noexec", "nodev", "mode=1777"}}},
      {{"destination", "/tmp"}, {"type", "tmpfs"}, {"source", "tmpfs"},
       {"options", {"nosuid", "nodev", "mode=1777"}}},
      // sysfs cannot be mounted afresh without a network namespace of one's own: the host's,
      // read-only (CPU topology for the job's libraries).
      {{"destination", "/sys"}, {"type", "bind"}, {"source", "/sys"},
       {"options", {"rbind", "ro", "nosuid", "noexec", "nodev"}}},
  });
  for (const char* etc : {"/etc/hosts", "/etc/resolv.conf"}) {
    if (Exists(etc)) mounts.push_back(Bind(etc, /*read_only=*/true));
  }
  mounts.push_back(Bind(plan.init, /*read_only=*/true));
  for (const auto& b : plan.binds) mounts.push_back(Bind(b.path, b.read_only));

  const json id_map_uid = json::array({{{"containerID", process.uid}, {"hostID", process.uid},
                                        {"size", 1}}});
  const json id_map_gid = json::array({{{"containerID", process.gid}, {"hostID", process.gid},
                                        {"size", 1}}});
  return json{
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", process.uid}, {"gid", process.gid}}},
        {"args", args},
        {"env", process.env},
        {"cwd", process.cwd},
        {"capabilities",
         {{"bounding", no_caps},
          {"effective", no_caps},
          {"inheritable", no_caps},
          {"permitted", no_caps},
          {"ambient", no_caps}}},
        {"noNewPrivileges", true}}},
      {"root", {{"path", plan.rootfs}, {"readonly", true}}},
      {"hostname", process.hostname.empty() ? "embody-job" : process.hostname},
      {"mounts", mounts},
      {"linux",
       {// No "network": the host's, as every other job's.
        {"namespaces", json::array({{{"type", "pid"}},
                                    {{"type", "ipc"}},
                                    {{"type", "uts"}},
                                    {{"type", "mount"}},
                                    {{"type", "user"}}})},
        {"uidMappings", id_map_uid},
        {"gidMappings", id_map_gid},
        {"maskedPaths",
         {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}},
        {"readonlyPaths",
         {"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
          "/proc/sysrq-trigger"}}}}};
}

}  // namespace agent
