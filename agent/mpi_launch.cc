#include "agent/mpi_launch.h"

#include <map>

namespace agent {
namespace {

// Ranks may not inherit the launcher's environment on remote nodes, so every Embody variable is
// forwarded explicitly with -x.
const char* const kForwardedVariables[] = {"EMBODY_AGENT_URL", "EMBODY_JOB_ID", "EMBODY_JOB_TOKEN",
                                           "EMBODY_CHECKPOINT_DIR"};

common::Result<std::vector<std::string>> ProgramArgv(const LaunchInput& in) {
  std::string kind = in.spec.is_object() ? in.spec.value("kind", "train") : "train";
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
  return argv;
}

}  // namespace

common::Result<LaunchPlan> BuildLaunchPlan(const LaunchInput& in) {
  if (in.hosts.empty()) return common::InvalidArgument("launch without hosts");
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
  plan.argv.insert(plan.argv.end(), program->begin(), program->end());

  plan.env = {{"EMBODY_AGENT_URL", in.agent_url},
              {"EMBODY_JOB_ID", std::to_string(in.job_id)},
              {"EMBODY_JOB_TOKEN", in.job_token},
              {"EMBODY_CHECKPOINT_DIR", in.checkpoint_dir}};
  if (!in.resume_from.empty()) plan.env.push_back({"EMBODY_RESUME_FROM", in.resume_from});
  if (in.as_root) {
    // Open MPI 4 refuses to start as root without both of these.
    plan.env.push_back({"OMPI_ALLOW_RUN_AS_ROOT", "1"});
    plan.env.push_back({"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"});
  }
  return plan;
}

std::vector<std::string> MergeEnvironment(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& add) {
  std::map<std::string, size_t> index;
  std::vector<std::string> out;
  for (const auto& kv : base) {
    std::string key = kv.substr(0, kv.find('='));
    auto it = index.find(key);
    if (it != index.end()) {
      out[it->second] = kv;
    } else {
      index[key] = out.size();
      out.push_back(kv);
    }
  }
  for (const auto& [k, v] : add) {
    auto it = index.find(k);
    if (it != index.end()) {
      out[it->second] = k + "=" + v;
    } else {
      index[k] = out.size();
      out.push_back(k + "=" + v);
    }
  }
  return out;
}

}  // namespace agent
