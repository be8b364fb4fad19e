#include "storage/import_reporter.h"

#include <cstdlib>

#include "api/launch_env.h"
#include "common/http/client.h"

namespace storage {

namespace {
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

common::Result<std::unique_ptr<ImportReporter>> ImportReporter::FromEnv() {
  const std::string url = Env(api::kEnvAgentUrl), job = Env(api::kEnvJobId),
                    token = Env(api::kEnvJobToken);
  if (url.empty() || job.empty() || token.empty()) {
    return common::FailedPrecondition(
        "--report needs EMBODY_AGENT_URL, EMBODY_JOB_ID and EMBODY_JOB_TOKEN (set for jobs by "
        "embody-agent)");
  }
  for (char c : job) {
    if (c < '0' || c > '9') return common::InvalidArgument("EMBODY_JOB_ID is not a number");
  }
  common::http::ClientOptions o;
  o.base_url = url;
  o.bearer_token = token;
  o.ca_file = Env(api::kEnvCaFile);  // the agent's API over TLS: the CAs its certificate chains to
  o.connect_timeout_s = 2;
  o.read_timeout_s = 10;
  o.write_timeout_s = 10;
  EMBODY_ASSIGN_OR_RETURN(client, common::http::Client::Create(o));
  return std::unique_ptr<ImportReporter>(
      new ImportReporter(std::move(client), "/v1/local/jobs/" + job + "/events"));
}

ImportReporter::ImportReporter(std::unique_ptr<common::http::Client> client, std::string path)
    : client_(std::move(client)), path_(std::move(path)) {}

ImportReporter::~ImportReporter() = default;

common::Status ImportReporter::Post(const nlohmann::json& event) {
  common::http::Request req;
  req.method = "POST";
  req.path = path_;
  req.body = nlohmann::json{{"events", nlohmann::json::array({event})}}.dump();
  auto r = client_->Call(req);
  return r.ok() ? common::Status::Ok() : r.status();
}

common::Status ImportReporter::Progress(uint64_t demos_done, uint64_t demos_total,
                                        uint64_t frames, uint64_t bytes) {
  const double fraction =
      demos_total == 0 ? 1.0 : static_cast<double>(demos_done) / static_cast<double>(demos_total);
  return Post({{"type", "progress"},
               {"fraction", fraction},
               {"demos_done", demos_done},
               {"demos_total", demos_total},
               {"frames", frames},
               {"bytes", bytes}});
}

nlohmann::json ImportReporter::Reportable(const nlohmann::json& manifest) {
  if (manifest.dump().size() <= kMaxReportedManifestBytes) return manifest;
  nlohmann::json m = manifest;
  m["truncated"] = true;
  if (m.contains("shards") && m["shards"].is_array()) {
    // The server checks that shard bytes add up; one summary entry keeps the total.
    uint64_t bytes = 0, episodes = 0;
    for (const auto& s : m["shards"]) {
      bytes += s.value("bytes", uint64_t{0});
      episodes += s.value("episodes", uint64_t{0});
    }
    m["shard_count"] = m["shards"].size();
    m["shards"] = nlohmann::json::array({{{"file", "*"}, {"episodes", episodes}, {"bytes", bytes}}});
  }
  if (m.dump().size() > kMaxReportedManifestBytes && m.contains("stats")) {
    m["stats"].erase("token_histogram");
  }
  if (m.dump().size() > kMaxReportedManifestBytes && m.contains("stats")) {
    m["stats"].erase("keys");
  }
  return m;
}

common::Status ImportReporter::Manifest(const nlohmann::json& manifest) {
  return Post({{"type", "dataset"}, {"manifest", Reportable(manifest)}});
}

common::Status ImportReporter::Error(const std::string& message) {
  return Post({{"type", "dataset"}, {"error", message.substr(0, 4000)}});
}

}  // namespace storage
