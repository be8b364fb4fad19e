// The server a simulator bench drives (bench/agent_simulator, bench/forecast_bench): a private
// PostgreSQL (tests/support/pg_harness.h) and the embody-server binary as a child process, so its
// CPU and memory are its own in /proc; or a server named by URL and tokens. Plus the few calls
// every such bench makes: a client per token, a JSON call, tenants with member tokens.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http/client.h"
#include "common/status.h"
#include "tests/support/pg_harness.h"

namespace bench {

struct StackOptions {
  std::string server_binary;  // embody-server, for a private stack
  int heartbeat_interval_ms = 1000;
  std::vector<std::string> server_args;  // more flags for the private server
  // A server to target instead of a private one (all three set, or none).
  std::string server;
  std::string join_token;
  std::string admin_token;
  int server_pid = 0;  // its pid, for CPU and memory; 0: unknown
};

// The server under test: a private one this process started, or the one named.
struct Stack {
  std::unique_ptr<embody::testing::PgCluster> pg;  // null for a named server
  std::unique_ptr<embody::testing::ChildProcess> server;
  std::string dir;  // scratch: the private server's data and log, agents' credentials
  std::string url;
  std::string admin_token;
  std::string join_token;
  pid_t server_pid = 0;
  pid_t postmaster = 0;
};

common::Status StartStack(const StackOptions& o, Stack* s);

std::string ReadAll(const std::string& path);

common::Result<std::unique_ptr<common::http::Client>> ClientFor(const std::string& url,
                                                                const std::string& token);
// One call; the answer's body as JSON (internal on a body that is not JSON).
common::Result<nlohmann::json> CallJson(common::http::Client& c, const std::string& method,
                                        const std::string& path,
                                        const nlohmann::json& body = nullptr);

struct Tenant {
  int64_t id = 0;
  std::string token;  // a member token of the tenant
};
// `n` new tenants named sim-<pid>-<i>, each with a member token.
common::Result<std::vector<Tenant>> MakeTenants(const Stack& s, int n);

}  // namespace bench
