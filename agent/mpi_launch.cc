#include "agent/mpi_launch.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "api/dataset_ref.h"

namespace agent {
namespace {

// A host name or IPv4/IPv6 address: one word of a hostfile line.
bool IsHostAddress(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '_') {
      return false;
    }
  }
  return s[0] != '-';
}

bool IsAgentUrl(const std::string& s) {
  if (s.size() > 2048) return false;
  if (s.rfind("http://", 0) != 0 && s.rfind("https://", 0) != 0) return false;
  for (unsigned char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

bool HasSpace(const std::string& s) {
  for (unsigned char c : s) {
    if (std::isspace(c)) return true;
  }
  return false;
}

// Ranks may not inherit the launcher's environment on remote nodes, so every Embody variable is
// forwarded explicitly with -x.
const char* const kForwardedVariables[] = {"EMBODY_AGENT_URL", "EMBODY_JOB_ID", "EMBODY_JOB_TOKEN",
                                           "EMBODY_CHECKPOINT_DIR"};

// Kind import: embody-data reading the source (an HDF5 file, or a LeRobot dataset directory)
// into `import_output`, reporting to the job-local API. The spec was validated by the server;
// the agent re-checks what it passes on.
common::Result<std::vector<std::string>> ImportArgv(const LaunchInput& in) {
  if (in.embody_data.empty()) return common::InvalidArgument("no embody-data path configured");
  if (in.import_output.empty()) return common::InvalidArgument("no import output directory");
  auto imp = in.spec.find("import");
  if (imp == in.spec.end() || !imp->is_object() || !imp->contains("source")) {
    return common::InvalidArgument("import job without an import source", "import");
  }
  auto source = api::ParseImportSource((*imp)["source"], "import.source");
  if (!source.ok()) return source.status();
  std::vector<std::string> argv{in.embody_data,
                                source->is_lerobot() ? "import-lerobot" : "import-hdf5",
                                source->path, in.import_output, "--report"};
  // "--opt=value": a value starting with '-' stays a value.
  if (!source->filter.empty()) argv.push_back("--filter=" + source->filter);
  if (!source->language.empty()) argv.push_back("--language=" + source->language);
  if (source->skip_nan) argv.push_back("--nan=skip");
  if (source->resize_height > 0) argv.push_back("--resize=" + api::ResizeText(*source));
  // The job holds one cpu slot: decode one episode at a time instead of the tool's default two.
  if (source->is_lerobot()) argv.push_back("--threads=1");
  return argv;
}

common::Result<std::vector<std::string>> ProgramArgv(const LaunchInput& in) {
  std::string kind = in.spec.is_object() ? in.spec.value("kind", "train") : "train";
  if (kind == "import") return ImportArgv(in);
  if (kind != "command") {
    if (in.engine.empty()) return common::InvalidArgument("no engine path configured");
    return std::vector<std::string>{in.engine, "--spec", in.job_dir + "/spec.json"};
  }
  std::vector<std::string> argv;
  auto it = in.spec.find("command");
  if (it == in.spec.end() || !it->is_array() || it->empty()) {
    return common::InvalidArgument("command job without a command", "command");
  }
  for (const auto& a : *it) {
    if (!a.is_string()) return common::InvalidArgument("command must be strings", "command");
    argv.push_back(a.get<std::string>());
  }
  if (argv[0].empty()) return common::InvalidArgument("command starts with an empty word", "command");
  return argv;
}

}  // namespace

common::Result<LaunchPlan> BuildLaunchPlan(const LaunchInput& in) {
  if (in.hosts.empty()) return common::InvalidArgument("launch without hosts");
  if (in.rank_exec.empty()) return common::InvalidArgument("no exec-rank binary configured");
  if (in.hosts[0].address != in.local_address) {
    return common::InvalidArgument("the launch's head is " + in.hosts[0].address +
                                   ", not this node (" + in.local_address + ")", "hosts");
  }
  LaunchPlan plan;
  // Slots per address, in the launch's order. Nodes at this node's address (agents sharing one
  // machine) are this machine: their ranks run under this mpirun, no rsh needed.
  std::vector<std::pair<std::string, int>> slots;
  nlohmann::json rsh_hosts = nlohmann::json::object();
  for (const auto& h : in.hosts) {
    if (h.ranks <= 0) return common::InvalidArgument("host with no ranks", "hosts");
    // The hostfile is line-based and the rsh launcher passes the host as one word.
    if (!IsHostAddress(h.address)) {
      return common::InvalidArgument("bad host address \"" + h.address + "\"", "hosts");
    }
    plan.total_ranks += h.ranks;
    auto same = std::find_if(slots.begin(), slots.end(),
                             [&](const auto& s) { return s.first == h.address; });
    if (same != slots.end() && h.address != in.local_address) {
      return common::InvalidArgument("two nodes of the job at address " + h.address, "hosts");
    }
    if (same != slots.end()) {
      same->second += h.ranks;
      continue;
    }
    slots.push_back({h.address, h.ranks});
    if (h.address == in.local_address) continue;
    if (!IsAgentUrl(h.agent_url)) {
      return common::InvalidArgument(
          "host " + h.address + " has no usable agent URL (\"" + h.agent_url + "\")", "hosts");
    }
    rsh_hosts[h.address] = h.agent_url;
  }
  for (const auto& [address, n] : slots) {
    plan.hostfile += address + " slots=" + std::to_string(n) + "\n";
  }
  const bool multi_node = slots.size() > 1;
  if (multi_node && (HasSpace(in.rank_exec) || HasSpace(in.job_dir) || HasSpace(in.ca_file))) {
    return common::InvalidArgument(
        "a multi-node launch needs the agent binary, data directory "
        "and CA file at paths without whitespace");
  }
  auto program = ProgramArgv(in);
  if (!program.ok()) return program.status();

  plan.hostfile_path = in.job_dir + "/hostfile";
  plan.ranks_dir = in.job_dir + "/ranks";
  plan.command_path = in.job_dir + "/command.json";
  plan.command = nlohmann::json{{"argv", *program}}.dump() + "\n";
  plan.argv = {in.mpirun, "--hostfile", plan.hostfile_path, "-np",
               std::to_string(plan.total_ranks), "--oversubscribe"};
  if (!multi_node) {
    plan.argv.insert(plan.argv.end(), {"--output-filename", plan.ranks_dir + ":nojobid,nocopy"});
  }
  if (multi_node) {
    plan.rsh_hosts_path = in.job_dir + "/rsh-hosts.json";
    plan.rsh_hosts = rsh_hosts.dump() + "\n";
    // The other agents' URLs are https when they serve TLS: the launcher verifies them against
    // the CA file this node was given.
    const std::string ca = in.ca_file.empty() ? "" : " --ca-file " + in.ca_file;
    plan.argv.insert(plan.argv.end(), {"--mca", "plm_rsh_agent",
                                       in.rank_exec + " rsh --hosts " + plan.rsh_hosts_path + ca,
                                       "--mca", "plm_rsh_no_tree_spawn", "1"});
  }
  for (const char* name : kForwardedVariables) {
    plan.argv.push_back("-x");
    plan.argv.push_back(name);
  }
  if (!in.resume_from.empty()) {
    plan.argv.push_back("-x");
    plan.argv.push_back("EMBODY_RESUME_FROM");
  }
  if (in.master_port > 0) {
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
      plan.argv.push_back("-x");
      plan.argv.push_back(name);
    }
  }
  if (!in.ca_file.empty()) {  // it goes with EMBODY_AGENT_URL
    plan.argv.push_back("-x");
    plan.argv.push_back("EMBODY_CA_FILE");
  }
  plan.argv.push_back("--");
  plan.argv.push_back(in.rank_exec);
  plan.argv.push_back("exec-rank");
  if (in.address_space_bytes > 0) {
    plan.argv.push_back("--address-space");
    plan.argv.push_back(std::to_string(in.address_space_bytes));
  }
  // On other nodes the command file is that node's own (exec-rank reads a relative FILE from
  // EMBODY_JOB_DIR, which each node's agent sets for the ranks it starts).
  plan.argv.push_back(multi_node ? "command.json" : plan.command_path);

  plan.env = {{"PATH", in.path},
              {"LANG", "C.UTF-8"},
              {"HOME", in.job_dir},
              {"TMPDIR", in.job_dir + "/tmp"},
              {"EMBODY_AGENT_URL", in.agent_url},
              {"EMBODY_JOB_ID", std::to_string(in.job_id)},
              {"EMBODY_JOB_TOKEN", in.job_token},
              {"EMBODY_CHECKPOINT_DIR", in.checkpoint_dir},
              {"EMBODY_NODE_ADDRESS", in.local_address}};
  // Open MPI 4.1 sends --output-filename to every daemon in the job's launch message, so a
  // remote daemon would create the head's path on its own node. A multi-node job's ranks write
  // their own output files instead, in the job directory of the node they run on (exec-rank,
  // EMBODY_RANK_LOG_DIR, never forwarded with -x).
  if (multi_node) {
    plan.env.push_back({"EMBODY_JOB_DIR", in.job_dir});
    plan.env.push_back({"EMBODY_RANK_LOG_DIR", plan.ranks_dir});
  }
  if (!in.resume_from.empty()) plan.env.push_back({"EMBODY_RESUME_FROM", in.resume_from});
  if (in.master_port > 0) {
    // torch.distributed's env:// rendezvous: rank 0's store on the head node, at the address the
    // other nodes reach it by (exec-rank sets RANK, WORLD_SIZE, LOCAL_RANK, ... from Open MPI's).
    plan.env.push_back({"MASTER_ADDR", in.hosts.empty() ? in.local_address : in.hosts[0].address});
    plan.env.push_back({"MASTER_PORT", std::to_string(in.master_port)});
  }
  if (!in.python_sdk.empty()) plan.env.push_back({"PYTHONPATH", in.python_sdk});
  if (!in.ca_file.empty()) plan.env.push_back({"EMBODY_CA_FILE", in.ca_file});
  if (in.cuda_visible_devices) {
    // CUDA numbers devices fastest first unless told otherwise; NVML (which the indices come
    // from) numbers them by PCI bus.
    plan.env.push_back({"CUDA_DEVICE_ORDER", "PCI_BUS_ID"});
    plan.env.push_back({"CUDA_VISIBLE_DEVICES", *in.cuda_visible_devices});
  }
  // Should mpirun itself be signalled (a rank died, the agent's SIGKILL), the ranks still get
  // the agent's grace period to end on their own before Open MPI SIGKILLs them (default 1 s).
  // A job of one rank has no other rank to wait for, and Open MPI 4.1 sleeps the timeout (twice,
  // measured) even when that rank has already exited: a failed import or one-rank job would end
  // 2 × grace late. For it, no wait.
  const int sigkill_timeout_s = plan.total_ranks == 1 ? 0 : in.kill_grace_s;
  plan.env.push_back({"OMPI_MCA_odls_base_sigkill_timeout", std::to_string(sigkill_timeout_s)});
  for (const auto& kv : in.mpi_settings) plan.env.push_back(kv);
  if (in.as_root) {
    // Open MPI 4 refuses to start as root without both of these.
    plan.env.push_back({"OMPI_ALLOW_RUN_AS_ROOT", "1"});
    plan.env.push_back({"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"});
  }
  return plan;
}

common::Result<DaemonPlan> BuildDaemonPlan(const LaunchInput& in, const std::string& daemon,
                                           const std::vector<std::string>& daemon_args) {
  if (daemon.empty()) return common::InvalidArgument("no daemon binary");
  std::string kind = in.spec.is_object() ? in.spec.value("kind", "train") : "train";
  if (kind == "import") return common::InvalidArgument("an import runs on one node only");
  auto program = ProgramArgv(in);
  if (!program.ok()) return program.status();
  DaemonPlan plan;
  plan.command_path = in.job_dir + "/command.json";
  plan.command = nlohmann::json{{"argv", *program}}.dump() + "\n";
  plan.ranks_dir = in.job_dir + "/ranks";
  plan.argv.push_back(daemon);
  plan.argv.insert(plan.argv.end(), daemon_args.begin(), daemon_args.end());
  // The ranks this daemon starts inherit this environment; mpirun's -x variables (the job's
  // token, agent URL and checkpoint directory, which are the head's) are laid over it.
  plan.env = {{"PATH", in.path},
              {"LANG", "C.UTF-8"},
              {"HOME", in.job_dir},
              {"TMPDIR", in.job_dir + "/tmp"},
              {"EMBODY_JOB_ID", std::to_string(in.job_id)},
              {"EMBODY_CHECKPOINT_DIR", in.checkpoint_dir},
              {"EMBODY_NODE_ADDRESS", in.local_address},
              {"EMBODY_JOB_DIR", in.job_dir},
              {"EMBODY_RANK_LOG_DIR", plan.ranks_dir},
              {"OMPI_MCA_odls_base_sigkill_timeout", std::to_string(in.kill_grace_s)}};
  // Each node's own copy of the SDK (not forwarded: paths differ between nodes).
  if (!in.python_sdk.empty()) plan.env.push_back({"PYTHONPATH", in.python_sdk});
  if (in.cuda_visible_devices) {
    plan.env.push_back({"CUDA_DEVICE_ORDER", "PCI_BUS_ID"});
    plan.env.push_back({"CUDA_VISIBLE_DEVICES", *in.cuda_visible_devices});
  }
  for (const auto& kv : in.mpi_settings) plan.env.push_back(kv);
  if (in.as_root) {
    plan.env.push_back({"OMPI_ALLOW_RUN_AS_ROOT", "1"});
    plan.env.push_back({"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"});
  }
  return plan;
}

std::string DaemonBinary(const std::string& mpirun, const std::string& program) {
  size_t slash = mpirun.rfind('/');
  if (slash == std::string::npos) return program;
  return mpirun.substr(0, slash + 1) + program;
}

std::vector<std::string> EnvironmentStrings(
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::pair<std::string, std::string>> OpenMpiSettings(
    const std::vector<std::string>& environ) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : environ) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (kv.rfind("OMPI_MCA_", 0) == 0 || kv.rfind("PMIX_MCA_", 0) == 0) {
      out.push_back({kv.substr(0, eq), kv.substr(eq + 1)});
    }
  }
  return out;
}

}  // namespace agent
