#include "engine/jobs/job_context.h"

#include "api/launch_env.h"
#include "common/file_util.h"

namespace engine {

LaunchEnv LaunchEnv::FromEnvironment(const EnvLookup& getenv) {
  auto get = [&](const char* name) {
    const char* v = getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  LaunchEnv e;
  e.agent_url = get(api::kEnvAgentUrl);
  e.job_id = get(api::kEnvJobId);
  e.job_token = get(api::kEnvJobToken);
  e.ca_file = get(api::kEnvCaFile);
  if (std::string dir = get(api::kEnvCheckpointDir); !dir.empty()) e.checkpoint_dir = dir;
  e.resume_from = get(api::kEnvResumeFrom);
  return e;
}

std::optional<ReporterConfig> LaunchEnv::Reporter() const {
  if (agent_url.empty()) return std::nullopt;
  ReporterConfig c;
  c.agent_url = agent_url;
  c.job_id = job_id;
  c.token = job_token;
  c.ca_file = ca_file;
  return c;
}

common::Result<JobContext> JobContext::Parse(const std::string& spec_path,
                                             const EnvLookup& getenv) {
  auto text = common::ReadFile(spec_path);
  if (!text.ok()) return common::InvalidArgument("cannot read spec: " + text.status().message());
  auto spec = api::ParseJobSpecText(*text, api::SpecLimits{});
  if (!spec.ok()) {
    return common::InvalidArgument("invalid spec " + spec_path + ": " + spec.status().ToString());
  }
  if (spec->kind != api::JobKind::kTrain && spec->kind != api::JobKind::kRl &&
      spec->kind != api::JobKind::kEval) {
    return common::InvalidArgument(std::string("spec kind is \"") + api::JobKindName(spec->kind) +
                                   "\"; embody-engine runs kinds \"train\", \"rl\" and \"eval\"");
  }
  return JobContext{spec_path, std::move(*spec), LaunchEnv::FromEnvironment(getenv)};
}

}  // namespace engine
