#include "agent/mpi_launch.h"

#include "api/dataset_ref.h"

namespace agent {
namespace {

// Ranks may not inherit the launcher's environment on remote nodes, so every Embody variable is
// forwarded explicitly with -x.
const char* const kForwardedVariables[] = {"EMBODY_AGENT_URL", "EMBODY_JOB_ID", "EMBODY_JOB_TOKEN",
                                           "EMBODY_CHECKPOINT_DIR"};

// Kind import: embody-data reading the source file into `import_output`, reporting to the
// job-local API. The spec was validated by the server; the agent re-checks what it passes on.
common::Result<std::vector<std::string>> ImportArgv(const LaunchInput& in) {
  if (in.embody_data.empty()) return common::InvalidArgument("no embody-data path configured");
  if (in.import_output.empty()) return common::InvalidArgument("no import output directory");
  auto imp = in.spec.find("import");
  if (imp == in.spec.end() || !imp->is_object() || !imp->contains("source")) {
    return common::InvalidArgument("import job without an import source", "import");
  }
  auto source = api::ParseImportSource((*imp)["source"], "import.source");
  if (!source.ok()) return source.status();
  std::vector<std::string> argv{in.embody_data, "import-hdf5", source->path, in.import_output,
                                "--report"};
  // "--opt=value": a value starting with '-' stays a value.
  if (!source->filter.empty()) argv.push_back("--filter=" + source->filter);
  if (!source->language.empty()) argv.push_back("--language=" + source->language);
  if (source->skip_nan) argv.push_back("--nan=skip");
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
  LaunchPlan plan;
  for (const auto& h : in.hosts) {
    if (h.address != in.local_address) {
      return common::FailedPrecondition("launching ranks on other hosts is not available yet");
    }
    if (h.ranks <= 0) return common::InvalidArgument("host with no ranks", "hosts");
    plan.total_ranks += h.ranks;
  }
  auto program = ProgramArgv(in);
  if (!program.ok()) return program.status();

  plan.hostfile_path = in.job_dir + "/hostfile";
  plan.hostfile = in.local_address + " slots=" + std::to_string(plan.total_ranks) + "\n";
  plan.ranks_dir = in.job_dir + "/ranks";
  plan.command_path = in.job_dir + "/command.json";
  plan.command = nlohmann::json{{"argv", *program}}.dump() + "\n";
  plan.argv = {in.mpirun,
               "--hostfile",
               plan.hostfile_path,
               "-np",
               std::to_string(plan.total_ranks),
               "--oversubscribe",
               "--output-filename",
               plan.ranks_dir + ":nojobid,nocopy"};
  for (const char* name : kForwardedVariables) {
    plan.argv.push_back("-x");
    plan.argv.push_back(name);
  }
  if (!in.resume_from.empty()) {
    plan.argv.push_back("-x");
    plan.argv.push_back("EMBODY_RESUME_FROM");
  }
  plan.argv.push_back("--");
  plan.argv.push_back(in.rank_exec);
  plan.argv.push_back("exec-rank");
  if (in.address_space_bytes > 0) {
    plan.argv.push_back("--address-space");
    plan.argv.push_back(std::to_string(in.address_space_bytes));
  }
  plan.argv.push_back(plan.command_path);

  plan.env = {{"PATH", in.path},
              {"LANG", "C.UTF-8"},
              {"HOME", in.job_dir},
              {"TMPDIR", in.job_dir + "/tmp"},
              {"EMBODY_AGENT_URL", in.agent_url},
              {"EMBODY_JOB_ID", std::to_string(in.job_id)},
              {"EMBODY_JOB_TOKEN", in.job_token},
              {"EMBODY_CHECKPOINT_DIR", in.checkpoint_dir}};
  if (!in.resume_from.empty()) plan.env.push_back({"EMBODY_RESUME_FROM", in.resume_from});
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
