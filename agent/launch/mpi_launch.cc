#include "agent/launch/mpi_launch.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "api/dataset_ref.h"
#include "api/job_spec.h"
#include "api/launch_env.h"

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
const char* const kForwardedVariables[] = {api::kEnvAgentUrl, api::kEnvJobId, api::kEnvJobToken,
                                           api::kEnvCheckpointDir};

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
  // An OCI image is a tar however it came (path or upload): unpacked and checked, no options.
  const char* command =
      source->is_oci() ? "import-oci" : source->is_lerobot() ? "import-lerobot" : "import-hdf5";
  std::vector<std::string> argv{in.embody_data, command, source->path, in.import_output,
                                "--report"};
  // "--opt=value": a value starting with '-' stays a value.
  if (!source->filter.empty()) argv.push_back("--filter=" + source->filter);
  if (!source->language.empty()) argv.push_back("--language=" + source->language);
  if (source->skip_nan) argv.push_back("--nan=skip");
  if (source->resize_height > 0) argv.push_back("--resize=" + api::ResizeText(*source));
  if (in.import_archive && source->is_lerobot()) argv.push_back("--tar");
  // The job holds one cpu slot: decode one episode at a time instead of the tool's default two.
  if (source->is_lerobot()) argv.push_back("--threads=1");
  return argv;
}

bool IsDirect(const nlohmann::json& spec) {
  return spec.is_object() && spec.value("kind", "") == "command" &&
         spec.value("launcher", "mpirun") == "direct";
}

bool IsTorchrun(const nlohmann::json& spec) {
  return spec.is_object() && spec.value("kind", "") == "command" &&
         spec.value("launcher", "mpirun") == "torchrun";
}

// A resources field of the spec as torchrun's argument; the server validated it.
common::Result<std::string> ResourceCount(const nlohmann::json& spec, const char* key) {
  auto r = spec.find("resources");
  if (r == spec.end() || !r->is_object() || !r->contains(key) || !(*r)[key].is_number_integer() ||
      (*r)[key].get<int64_t>() < 1) {
    return common::InvalidArgument(std::string("torchrun needs resources.") + key, "resources");
  }
  return std::to_string((*r)[key].get<int64_t>());
}

// Kind command with "launcher": "torchrun": each node's one process is torchrun (as Python's
// module, so it needs no script on PATH) starting the node's ranks_per_node workers: the SDK's
// `embody.torchrun`, which is torch's with its --redirects/--tee parsing repaired for old torch
// on Python 3.11 (sdk/python/embody/torchrun.py), where the SDK is on the ranks' path. The node's
// rank and the rendezvous address are per node, while the command file is the same everywhere,
// so exec-rank gives them through torchrun's own environment (PET_NODE_RANK, PET_MASTER_ADDR,
// PET_MASTER_PORT). Static rendezvous; elastic restarts off (the platform restarts the job).
common::Result<std::vector<std::string>> TorchrunArgv(const LaunchInput& in,
                                                      std::vector<std::string> script) {
  auto nodes = ResourceCount(in.spec, "nodes");
  if (!nodes.ok()) return nodes.status();
  auto per_node = ResourceCount(in.spec, "ranks_per_node");
  if (!per_node.ok()) return per_node.status();
  // Underscored option names: torch 1.x knows no others, 2.x both.
  const char* module = in.python_sdk.empty() ? "torch.distributed.run" : "embody.torchrun";
  std::vector<std::string> argv{"python3", "-m", module,
                                "--nnodes", *nodes, "--nproc_per_node", *per_node,
                                "--rdzv_backend", "static", "--max_restarts", "0"};
  argv.insert(argv.end(), script.begin(), script.end());
  return argv;
}

// EMBODY_DATASETS of a command job's ranks: the launch spec's "datasets", the object the server
// made from the versions bound to the job (NAME@VERSION -> directory). The server wrote it; the
// agent still passes on only what has that shape.
common::Result<std::string> BoundDatasets(const nlohmann::json& spec) {
  auto it = spec.find("datasets");
  if (it == spec.end()) return std::string();
  if (!it->is_object()) {
    return common::InvalidArgument("datasets must be an object of bound versions", "datasets");
  }
  for (auto d = it->begin(); d != it->end(); ++d) {
    const std::string& key = d.key();
    const size_t at = key.rfind('@');
    const bool key_ok = at != std::string::npos && api::IsValidName(key.substr(0, at)) &&
                        at + 1 < key.size() &&
                        key.find_first_not_of("0123456789", at + 1) == std::string::npos;
    if (!key_ok || !d->is_string() ||
        !api::ParseDatasetRef(api::kDirDatasetPrefix + d->get<std::string>(), "datasets").ok()) {
      return common::InvalidArgument("bad bound dataset \"" + key + "\"", "datasets");
    }
  }
  return it->dump();
}

// PATH and VIRTUAL_ENV of a job whose spec names a virtualenv: its bin/ before the node's PATH.
common::Status AddPythonEnvironment(const LaunchInput& in,
                                    std::vector<std::pair<std::string, std::string>>* env) {
  auto venv = PythonEnvironmentOf(in.spec);
  if (!venv.ok()) return venv.status();
  if (venv->empty()) return common::Status::Ok();
  for (auto& [key, value] : *env) {
    if (key == "PATH") value = *venv + "/bin:" + value;
  }
  env->push_back({"VIRTUAL_ENV", *venv});
  return common::Status::Ok();
}

// What exec-rank reads (agent/launch/rank_exec.h): the argv, and under torchrun that each process
// is a node's.
std::string CommandFile(const LaunchInput& in, const std::vector<std::string>& program) {
  nlohmann::json c{{"argv", program}};
  if (IsTorchrun(in.spec)) c["launcher"] = "torchrun";
  // The store wait of the default launcher's ranks; torchrun waits in embody.torchrun, and an
  // image's programs cannot load a library of this node's.
  const bool command = in.spec.is_object() && in.spec.value("kind", "") == "command";
  if (command && !IsTorchrun(in.spec) && !in.container && !in.rendezvous_wait.empty()) {
    c["rendezvous_wait"] = in.rendezvous_wait;
  }
  if (in.container) {
    ContainerPlan plan = *in.container;
    plan.binds = {{in.job_dir, /*read_only=*/false}, {in.checkpoint_dir, /*read_only=*/false}};
    if (!in.python_sdk.empty()) plan.binds.push_back({in.python_sdk, true});
    if (!in.resume_from.empty()) {
      const size_t slash = in.resume_from.rfind('/');
      if (slash != std::string::npos && slash > 0) {
        plan.binds.push_back({in.resume_from.substr(0, slash), true});
      }
    }
    if (auto d = in.spec.find("datasets"); d != in.spec.end() && d->is_object()) {
      for (const auto& dir : *d) {
        if (dir.is_string()) plan.binds.push_back({dir.get<std::string>(), true});
      }
    }
    if (!in.ca_file.empty()) plan.binds.push_back({in.ca_file, true, /*is_file=*/true});
    c["container"] = ToJson(plan);
  }
  return c.dump() + "\n";
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
  // An image the server did not bind is refused here as a bad virtualenv path is.
  if (auto image = ImageOf(in.spec); !image.ok()) return image.status();
  if (IsTorchrun(in.spec)) return TorchrunArgv(in, std::move(argv));
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
  // Under torchrun mpirun starts one process per node, which starts the node's ranks itself.
  const bool torchrun = IsTorchrun(in.spec);
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
    const int processes = torchrun ? 1 : h.ranks;
    plan.total_ranks += processes;
    auto same = std::find_if(slots.begin(), slots.end(),
                             [&](const auto& s) { return s.first == h.address; });
    if (same != slots.end() && h.address != in.local_address) {
      return common::InvalidArgument("two nodes of the job at address " + h.address, "hosts");
    }
    if (same != slots.end()) {
      same->second += processes;
      continue;
    }
    slots.push_back({h.address, processes});
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
  const std::string& rsh_exec = in.rsh_exec.empty() ? in.rank_exec : in.rsh_exec;
  if (multi_node && (HasSpace(in.rank_exec) || HasSpace(rsh_exec) || HasSpace(in.job_dir) ||
                     HasSpace(in.ca_file))) {
    return common::InvalidArgument(
        "a multi-node launch needs the agent binary, data directory "
        "and CA file at paths without whitespace");
  }
  auto program = ProgramArgv(in);
  if (!program.ok()) return program.status();
  auto datasets = BoundDatasets(in.spec);
  if (!datasets.ok()) return datasets.status();

  plan.hostfile_path = in.job_dir + "/hostfile";
  plan.ranks_dir = in.job_dir + "/ranks";
  plan.command_path = in.job_dir + "/command.json";
  plan.command = CommandFile(in, *program);
  // No binding: left to itself mpirun pins each rank to one core, counted from core 0 by every
  // mpirun alike, so a rank holding several slots runs on one core, and two jobs sharing a node
  // share its first cores. The job's cgroup bounds its CPU time instead (ranks x slots CPUs).
  plan.argv = {in.mpirun, "--hostfile", plan.hostfile_path, "-np",
               std::to_string(plan.total_ranks), "--oversubscribe", "--bind-to", "none"};
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
                                       rsh_exec + " rsh --hosts " + plan.rsh_hosts_path + ca,
                                       "--mca", "plm_rsh_no_tree_spawn", "1"});
  }
  for (const char* name : kForwardedVariables) {
    plan.argv.push_back("-x");
    plan.argv.push_back(name);
  }
  if (!in.resume_from.empty()) {
    plan.argv.push_back("-x");
    plan.argv.push_back(api::kEnvResumeFrom);
  }
  if (in.master_port > 0) {
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
      plan.argv.push_back("-x");
      plan.argv.push_back(name);
    }
  }
  if (!datasets->empty()) {  // the same directories on every node, as a train job's "dir:"
    plan.argv.push_back("-x");
    plan.argv.push_back(api::kEnvDatasets);
  }
  if (!in.ca_file.empty()) {  // it goes with EMBODY_AGENT_URL
    plan.argv.push_back("-x");
    plan.argv.push_back(api::kEnvCaFile);
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
  if (IsDirect(in.spec)) {
    // The node's ranks forked by the agent binary itself (agent/launch/direct_launch.h), in the
    // same sandbox mpirun would have run in; everything but the launcher is as under mpirun.
    if (multi_node) {
      return common::InvalidArgument("launcher \"direct\" starts the ranks of one node only",
                                     "launcher");
    }
    plan.argv = {in.rank_exec, "launch-ranks", "--ranks", std::to_string(plan.total_ranks),
                 "--output", plan.ranks_dir, "--grace-s", std::to_string(in.kill_grace_s)};
    if (in.address_space_bytes > 0) {
      plan.argv.insert(plan.argv.end(),
                       {"--address-space", std::to_string(in.address_space_bytes)});
    }
    plan.argv.push_back(plan.command_path);
  }

  plan.env = {{"PATH", in.path},
              {"LANG", "C.UTF-8"},
              {"HOME", in.job_dir},
              {"TMPDIR", in.job_dir + "/tmp"},
              {api::kEnvAgentUrl, in.agent_url},
              {api::kEnvJobId, std::to_string(in.job_id)},
              {api::kEnvJobToken, in.job_token},
              {api::kEnvCheckpointDir, in.checkpoint_dir},
              {api::kEnvNodeAddress, in.local_address}};
  if (auto st = AddPythonEnvironment(in, &plan.env); !st.ok()) return st;
  // Open MPI 4.1 sends --output-filename to every daemon in the job's launch message, so a
  // remote daemon would create the head's path on its own node. A multi-node job's ranks write
  // their own output files instead, in the job directory of the node they run on (exec-rank,
  // EMBODY_RANK_LOG_DIR, never forwarded with -x).
  if (multi_node) {
    plan.env.push_back({api::kEnvJobDir, in.job_dir});
    plan.env.push_back({api::kEnvRankLogDir, plan.ranks_dir});
  }
  if (!in.resume_from.empty()) plan.env.push_back({api::kEnvResumeFrom, in.resume_from});
  if (in.master_port > 0) {
    // torch.distributed's env:// rendezvous: rank 0's store on the head node, at the address the
    // other nodes reach it by (exec-rank sets RANK, WORLD_SIZE, LOCAL_RANK, ... from Open MPI's).
    plan.env.push_back({"MASTER_ADDR", in.hosts.empty() ? in.local_address : in.hosts[0].address});
    plan.env.push_back({"MASTER_PORT", std::to_string(in.master_port)});
  }
  if (!in.python_sdk.empty()) plan.env.push_back({"PYTHONPATH", in.python_sdk});
  if (!datasets->empty()) plan.env.push_back({api::kEnvDatasets, *datasets});
  if (!in.ca_file.empty()) plan.env.push_back({api::kEnvCaFile, in.ca_file});
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
  // A node's torchrun has workers to wait for.
  const int sigkill_timeout_s = plan.total_ranks == 1 && !torchrun ? 0 : in.kill_grace_s;
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
  plan.command = CommandFile(in, *program);
  plan.ranks_dir = in.job_dir + "/ranks";
  plan.argv.push_back(daemon);
  plan.argv.insert(plan.argv.end(), daemon_args.begin(), daemon_args.end());
  // The ranks this daemon starts inherit this environment; mpirun's -x variables (the job's
  // token, agent URL and checkpoint directory, which are the head's) are laid over it.
  plan.env = {{"PATH", in.path},
              {"LANG", "C.UTF-8"},
              {"HOME", in.job_dir},
              {"TMPDIR", in.job_dir + "/tmp"},
              {api::kEnvJobId, std::to_string(in.job_id)},
              {api::kEnvCheckpointDir, in.checkpoint_dir},
              {api::kEnvNodeAddress, in.local_address},
              {api::kEnvJobDir, in.job_dir},
              {api::kEnvRankLogDir, plan.ranks_dir},
              {"OMPI_MCA_odls_base_sigkill_timeout", std::to_string(in.kill_grace_s)}};
  if (auto st = AddPythonEnvironment(in, &plan.env); !st.ok()) return st;
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

common::Result<std::string> PythonEnvironmentOf(const nlohmann::json& spec) {
  if (!spec.is_object() || spec.value("kind", "") != "command") return std::string();
  auto e = spec.find("environment");
  if (e == spec.end()) return std::string();
  if (e->is_object() && e->contains("image") && !e->contains("python")) return std::string();
  if (!e->is_object() || !e->contains("python") || !(*e)["python"].is_string()) {
    return common::InvalidArgument("environment must name a virtualenv as \"python\"",
                                   "environment");
  }
  return api::ParsePythonEnvironment((*e)["python"].get<std::string>(), "environment.python");
}

common::Result<std::optional<ImageRef>> ImageOf(const nlohmann::json& spec) {
  if (!spec.is_object() || spec.value("kind", "") != "command") return std::optional<ImageRef>();
  auto e = spec.find("environment");
  if (e == spec.end() || !e->is_object() || !e->contains("image")) {
    return std::optional<ImageRef>();
  }
  const nlohmann::json& i = (*e)["image"];
  auto text = [&](const char* key) {
    return i.is_object() && i.contains(key) && i[key].is_string() ? i[key].get<std::string>()
                                                                   : std::string();
  };
  ImageRef ref{text("name"), text("path"), text("digest")};
  const std::string& d = ref.digest;
  const bool digest_ok =
      d.size() == 71 && d.compare(0, 7, "sha256:") == 0 &&
      d.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
  if (ref.name.empty() || !digest_ok ||
      !api::ParseDatasetRef(api::kDirDatasetPrefix + ref.path, "environment.image").ok()) {
    return common::InvalidArgument("environment.image is not a bound image (name, path, digest)",
                                   "environment.image");
  }
  return std::optional<ImageRef>(std::move(ref));
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
