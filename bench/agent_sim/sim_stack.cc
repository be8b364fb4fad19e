#include "bench/agent_sim/sim_stack.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/time_util.h"

namespace bench {

using nlohmann::json;

namespace {

bool WaitForFile(const std::string& path, double timeout_s) {
  const double end = common::MonotonicSeconds() + timeout_s;
  while (common::MonotonicSeconds() < end) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) > 0 && !ec) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

common::Status StartStack(const StackOptions& o, Stack* s) {
  std::string tmpl = "/tmp/embody-agent-sim-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return common::Internal("mkdtemp failed");
  s->dir = tmpl;
  if (!o.server.empty()) {
    s->url = o.server;
    s->admin_token = o.admin_token;
    s->join_token = o.join_token;
    s->server_pid = o.server_pid;
    return common::Status::Ok();
  }
  s->pg = std::make_unique<embody::testing::PgCluster>();
  EMBODY_RETURN_IF_ERROR(s->pg->Start());
  std::ifstream(s->pg->dir() + "/pgdata/postmaster.pid") >> s->postmaster;
  const std::string port_file = s->dir + "/server.port";
  const std::string bootstrap = s->dir + "/bootstrap.json";
  std::vector<std::string> argv{o.server_binary,
                                "--listen",
                                "127.0.0.1:0",
                                "--db",
                                s->pg->conninfo(),
                                "--data-dir",
                                s->dir + "/server",
                                "--port-file",
                                port_file,
                                "--bootstrap-out",
                                bootstrap,
                                "--heartbeat-interval-ms",
                                std::to_string(o.heartbeat_interval_ms)};
  argv.insert(argv.end(), o.server_args.begin(), o.server_args.end());
  s->server = std::make_unique<embody::testing::ChildProcess>();
  EMBODY_RETURN_IF_ERROR(s->server->Start(argv, s->dir + "/server.log"));
  s->server_pid = s->server->pid();
  if (!WaitForFile(port_file, 60) || !WaitForFile(bootstrap, 10)) {
    return common::Internal("embody-server did not start:\n" + ReadAll(s->dir + "/server.log"));
  }
  std::string port = ReadAll(port_file);
  while (!port.empty() && (port.back() == '\n' || port.back() == ' ')) port.pop_back();
  s->url = "http://127.0.0.1:" + port;
  const json b = json::parse(ReadAll(bootstrap), nullptr, false);
  if (b.is_discarded() || !b.contains("admin_token") || !b.contains("agent_token")) {
    return common::Internal("bad bootstrap file " + bootstrap);
  }
  s->admin_token = b["admin_token"].get<std::string>();
  s->join_token = b["agent_token"].get<std::string>();
  return common::Status::Ok();
}

common::Result<std::unique_ptr<common::http::Client>> ClientFor(const std::string& url,
                                                                const std::string& token) {
  return common::http::Client::Create({url, 3, 30, 30, token, /*ca_file=*/""});
}

common::Result<json> CallJson(common::http::Client& c, const std::string& method,
                              const std::string& path, const json& body) {
  common::http::Request req;
  req.method = method;
  req.path = path;
  if (!body.is_null()) req.body = body.dump();
  EMBODY_ASSIGN_OR_RETURN(res, c.Call(req));
  json j = json::parse(res.body, nullptr, false);
  if (j.is_discarded()) return common::Internal(path + ": malformed JSON");
  return j;
}

common::Result<std::vector<Tenant>> MakeTenants(const Stack& s, int n) {
  EMBODY_ASSIGN_OR_RETURN(admin, ClientFor(s.url, s.admin_token));
  std::vector<Tenant> out;
  const std::string suffix = std::to_string(::getpid());
  for (int i = 0; i < n; ++i) {
    EMBODY_ASSIGN_OR_RETURN(t, CallJson(*admin, "POST", "/v1/tenants",
                                        {{"name", "sim-" + suffix + "-" + std::to_string(i)}}));
    Tenant tenant;
    tenant.id = t.value("id", int64_t{0});
    EMBODY_ASSIGN_OR_RETURN(
        tok, CallJson(*admin, "POST", "/v1/tokens",
                      {{"role", "member"}, {"name", "sim"}, {"tenant_id", tenant.id}}));
    tenant.token = tok.value("token", "");
    if (tenant.id == 0 || tenant.token.empty()) return common::Internal("tenant setup failed");
    out.push_back(std::move(tenant));
  }
  return out;
}

}  // namespace bench
