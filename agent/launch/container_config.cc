#include "agent/launch/container_config.h"

#include <sys/stat.h>

#include <map>

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

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

constexpr size_t kMaxImageEnv = 1024;
constexpr size_t kMaxImageEnvEntry = 32 * 1024;

bool ValidEnvEntry(const std::string& kv) {
  if (kv.size() > kMaxImageEnvEntry || kv.find('\0') != std::string::npos) return false;
  const size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  if (kv[0] >= '0' && kv[0] <= '9') return false;
  for (size_t i = 0; i < eq; ++i) {
    const char c = kv[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

bool Exists(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0;
}

}  // namespace

common::Result<ImageRunConfig> ParseImageRunConfig(const json& config_blob) {
  if (!config_blob.is_object()) {
    return common::InvalidArgument("the image's config blob is not a JSON object");
  }
  ImageRunConfig out;
  if (!config_blob.contains("config") || config_blob["config"].is_null()) return out;
  const json& c = config_blob["config"];
  if (!c.is_object()) return common::InvalidArgument("the image's config is not an object");
  if (c.contains("Env") && !c["Env"].is_null()) {
    const json& env = c["Env"];
    if (!env.is_array() || env.size() > kMaxImageEnv) {
      return common::InvalidArgument("the image's Env must be an array of at most " +
                                     std::to_string(kMaxImageEnv) + " strings");
    }
    for (const json& e : env) {
      if (!e.is_string()) return common::InvalidArgument("the image's Env holds a non-string");
      const std::string v = e.get<std::string>();
      if (!ValidEnvEntry(v)) {
        return common::InvalidArgument("the image's Env has an entry that is not KEY=VALUE: \"" +
                                       v.substr(0, 64) + "\"");
      }
      out.env.push_back(v);
    }
  }
  if (c.contains("WorkingDir") && !c["WorkingDir"].is_null()) {
    if (!c["WorkingDir"].is_string()) {
      return common::InvalidArgument("the image's WorkingDir is not a string");
    }
    std::string w = c["WorkingDir"].get<std::string>();
    while (w.size() > 1 && w.back() == '/') w.pop_back();
    if (!w.empty() && !CleanAbsolute(w)) {
      return common::InvalidArgument("the image's WorkingDir \"" + w.substr(0, 256) +
                                     "\" is not an absolute path without \"..\"");
    }
    out.working_dir = w;
  }
  return out;
}

json ToJson(const ImageRunConfig& config) {
  return json{{"env", config.env}, {"working_dir", config.working_dir}};
}

common::Result<ImageRunConfig> ParseImageRunConfigJson(const json& j) {
  // The same checks as on the image's own blob.
  if (!j.is_object() || !j.contains("env") || !j.contains("working_dir")) {
    return common::InvalidArgument("an image run config needs env and working_dir");
  }
  return ParseImageRunConfig(json{{"config", {{"Env", j["env"]}, {"WorkingDir", j["working_dir"]}}}});
}

std::vector<std::string> MergeImageEnvironment(const std::vector<std::string>& image_env,
                                               const std::vector<std::string>& rank_env) {
  auto key_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  auto value_of = [](const std::string& kv) {
    const size_t eq = kv.find('=');
    return eq == std::string::npos ? std::string() : kv.substr(eq + 1);
  };
  std::vector<std::string> out;
  std::map<std::string, size_t> at;  // key -> index in out
  for (const auto& kv : image_env) {
    const std::string key = key_of(kv);
    if (auto it = at.find(key); it != at.end()) {
      out[it->second] = kv;  // the image's later entry, as a shell would take it
    } else {
      at[key] = out.size();
      out.push_back(kv);
    }
  }
  for (const auto& kv : rank_env) {
    const std::string key = key_of(kv);
    auto it = at.find(key);
    if (it == at.end()) {
      at[key] = out.size();
      out.push_back(kv);
    } else if (key == "PATH" || key == "LD_LIBRARY_PATH") {
      // The image's.
    } else if (key == "PYTHONPATH") {
      const std::string image_value = value_of(out[it->second]), own = value_of(kv);
      out[it->second] = "PYTHONPATH=" + (own.empty()           ? image_value
                                         : image_value.empty() ? own
                                                               : own + ":" + image_value);
    } else {
      out[it->second] = kv;
    }
  }
  return out;
}

std::string ContainerWorkingDir(const ContainerPlan& plan, const std::string& cwd,
                                const std::string& home) {
  if (!plan.image.working_dir.empty()) return plan.image.working_dir;
  for (const auto& b : plan.binds) {
    if (!b.is_file && Under(cwd, b.path)) return cwd;
  }
  return home;
}

json ToJson(const ContainerPlan& plan) {
  json binds = json::array();
  for (const auto& b : plan.binds) {
    binds.push_back({{"path", b.path}, {"read_only", b.read_only}, {"file", b.is_file}});
  }
  return json{{"rootfs", plan.rootfs}, {"init", plan.init},   {"crun", plan.crun},
              {"binds", binds},        {"image", ToJson(plan.image)}};
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
  if (j.contains("image")) {
    auto image = ParseImageRunConfigJson(j["image"]);
    if (!image.ok()) return common::InvalidArgument("container.image: " + image.status().message());
    plan.image = *image;
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
