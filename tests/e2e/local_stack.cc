#include "tests/e2e/local_stack.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "common/crypto.h"
#include "common/file_util.h"

namespace embody_test {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitForFile(const std::string& path, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    std::error_code ec;
    if (fs::exists(path, ec) && fs::file_size(path, ec) > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

LocalStack::LocalStack(int agents, int slots_per_agent) : agents_(agents), slots_(slots_per_agent) {
  char tmpl[] = "/tmp/embody-e2e-XXXXXX";
  dir_ = ::mkdtemp(tmpl);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

std::vector<int> ProcessesWith(const std::string& needle) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    for (const char* file : {"environ", "cmdline"}) {
      // A zombie has an empty environ and cmdline: it is not counted as left behind.
      std::string s = ReadAll("/proc/" + std::to_string(pid) + "/" + file);
      for (char& c : s) c = c == '\0' ? '\n' : c;
      if (s.find(needle) != std::string::npos) {
        out.push_back(pid);
        break;
      }
    }
  }
  ::closedir(d);
  return out;
}

void LocalStack::LoseNode(int i) {
  agent_procs_.at(i)->Kill();
  std::string name = std::string("node-") + static_cast<char>('a' + i);
  std::string needle = "EMBODY_CHECKPOINT_DIR=" + dir_ + "/agents/" + name + "/";
  for (int round = 0; round < 3; ++round) {
    for (int pid : ProcessesWith(needle)) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // A lost machine takes its job network rules with it; here the agents share one kernel, and
  // the killed agent's rules for its jobs' uids (the same numbers the other agent hands out)
  // would go on refusing what the other node's jobs send.
  RemoveJobNetworkTable(i);
}

void LocalStack::RemoveJobNetworkTable(int i) {
  if (::geteuid() != 0) return;  // a root agent's alone (agent/sandbox/job_network.h)
  // The agent's table name: embody_jobs_ and 12 hex digits of its data directory's SHA-256
  // (agent/agent.cc). Absent (stopped cleanly, never confined): nothing to do.
  const std::string table = "embody_jobs_" + common::Sha256Hex(agent_data_dir(i)).substr(0, 12);
  const std::string cmd = "nft delete table inet " + table + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    // Not there, or no nft on this machine: either way nothing of it is left to refuse.
  }
}

int64_t LocalStack::SubmitJob(const nlohmann::json& spec) {
  HttpResult r = Post("/v1/jobs", spec.dump());
  EXPECT_EQ(r.status, 201) << r.text;
  return r.status == 201 ? r.body["id"].get<int64_t>() : -1;
}

std::string LocalStack::JobLog(int64_t id, int rank) {
  return Get("/v1/jobs/" + std::to_string(id) + "/logs?rank=" + std::to_string(rank)).text;
}

void LocalStack::KillAgent(int i) { agent_procs_.at(i)->Kill(); }

bool LocalStack::RestartAgent(int i) {
  return agent_procs_.at(i)->Start(agent_argv_.at(i), restarted_agent_log(i)).ok();
}

void LocalStack::LoseNodeAndDisk(int i) {
  LoseNode(i);
  std::error_code ec;
  fs::remove_all(agent_data_dir(i), ec);
}

LocalStack::~LocalStack() {
  for (auto& a : agent_procs_) a->Stop();
  // An agent a test killed and never started again left its table behind.
  for (size_t i = 0; i < agent_procs_.size(); ++i) RemoveJobNetworkTable(static_cast<int>(i));
  if (server_) server_->Stop();
  pg_.reset();
  if (!std::getenv("EMBODY_KEEP_TEST_DIR")) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string LocalStack::bin_dir() { return EMBODY_BIN_DIR; }

nlohmann::json LocalStack::ResumableTrainSpec(const std::string& name) {
  nlohmann::json spec = nlohmann::json::parse(R"({
    "kind": "train", "max_restarts": 1,
    "resources": {"nodes": 1, "ranks_per_node": 1},
    "engine": {"model": {"d_model": 32, "layers": 1, "heads": 2, "mlp": 64},
               "data": {"rows_per_step": 1},
               "optim": {"steps": 600, "warmup_steps": 5},
               "checkpoint": {"every_steps": 25, "keep": 2}}})");
  spec["name"] = name;
  return spec;
}

void LocalStack::EnableDatasetRoot() {
  dataset_root_ = dir_ + "/datasets";
  std::error_code ec;
  fs::create_directories(dataset_root_, ec);
  // Job users read published versions through it; only root writes in it.
  fs::permissions(dataset_root_,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
}

bool LocalStack::Start() {
  pg_ = std::make_unique<PgCluster>();
  if (common::Status st = pg_->Start(); !st.ok()) {
    std::fprintf(stderr, "PostgreSQL did not start: %s\n", st.ToString().c_str());
    return false;
  }
  std::string bin = EMBODY_BIN_DIR;
  std::string port_file = dir_ + "/server.port";
  std::string bootstrap = dir_ + "/bootstrap.json";
  server_ = std::make_unique<ChildProcess>();
  std::vector<std::string> server_argv{bin + "/embody-server",
                                       "--listen",
                                       server_host_ + ":0",
                                       "--db",
                                       pg_->conninfo(),
                                       "--data-dir",
                                       dir_ + "/server",
                                       "--port-file",
                                       port_file,
                                       "--bootstrap-out",
                                       bootstrap,
                                       "--heartbeat-interval-ms",
                                       std::to_string(heartbeat_interval_ms_)};
  if (!dataset_root_.empty()) {
    server_argv.insert(server_argv.end(), {"--dataset-root", dataset_root_});
  }
  server_argv.insert(server_argv.end(), server_flags_.begin(), server_flags_.end());
  server_argv_ = server_argv;
  server_starts_ = 1;
  common::Status started = server_->Start(server_argv, dir_ + "/server.log");
  if (!started.ok() || !WaitForFile(port_file, 30) || !WaitForFile(bootstrap, 10)) {
    std::fprintf(stderr, "server did not start:\n%s\n", ReadAll(dir_ + "/server.log").c_str());
    return false;
  }
  url_ = "http://" + server_host_ + ":" + ReadAll(port_file);
  while (!url_.empty() && (url_.back() == '\n' || url_.back() == ' ')) url_.pop_back();
  json b = json::parse(ReadAll(bootstrap), nullptr, false);
  if (b.is_discarded() || !b.contains("admin_token")) {
    std::fprintf(stderr, "bad bootstrap file\n");
    return false;
  }
  admin_token_ = b["admin_token"].get<std::string>();

  // Job uids of this stack's own (stacks of tests running side by side never share one), the
  // same on every agent, as on nodes that share checkpoint storage.
  const std::string uid_base = std::to_string(200000 + (::getpid() % 5000) * 1000);
  metrics_token_ = common::RandomToken();
  if (common::Status st = common::WriteFileAtomic(metrics_token_file(), metrics_token_, 0600);
      !st.ok()) {
    std::fprintf(stderr, "cannot write the metrics token: %s\n", st.ToString().c_str());
    return false;
  }
  for (int i = 0; i < agents_; ++i) {
    std::string name = std::string("node-") + static_cast<char>('a' + i);
    agent_procs_.push_back(std::make_unique<ChildProcess>());
    std::vector<std::string> agent_argv{bin + "/embody-agent",
                                        "--server",
                                        url_,
                                        "--token-file",
                                        bootstrap,
                                        "--name",
                                        name,
                                        "--data-dir",
                                        dir_ + "/agents/" + name,
                                        "--slots",
                                        std::to_string(slots_),
                                        "--address",
                                        "127.0.0.1",
                                        "--job-uid-base",
                                        uid_base,
                                        "--job-uid-count",
                                        "1000",
                                        "--metrics-token-file",
                                        metrics_token_file()};
    if (!dataset_root_.empty())
      agent_argv.insert(agent_argv.end(), {"--dataset-root", dataset_root_});
    if (i < static_cast<int>(agent_places_.size()) && !agent_places_[i].address.empty()) {
      const AgentPlace& place = agent_places_[i];
      *(std::find(agent_argv.begin(), agent_argv.end(), "--address") + 1) = place.address;
      agent_argv.insert(agent_argv.end(), {"--listen", place.address + ":0"});
      agent_argv.insert(agent_argv.begin(), place.prefix.begin(), place.prefix.end());
    }
    agent_argv.insert(agent_argv.end(), agent_flags_.begin(), agent_flags_.end());
    agent_argv_.push_back(agent_argv);
    common::Status st = agent_procs_.back()->Start(agent_argv, dir_ + "/agent-" + name + ".log");
    if (!st.ok()) {
      std::fprintf(stderr, "agent %s did not start: %s\n", name.c_str(), st.ToString().c_str());
      return false;
    }
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    HttpResult r = Get("/v1/nodes");
    int up = 0;
    if (r.status == 200) {
      for (const auto& n : r.body["nodes"]) up += n.value("state", "") == "UP";
    }
    if (up == agents_) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "agents did not come up:\n%s\n",
               ReadAll(dir_ + "/agent-node-a.log").c_str());
  return false;
}

void LocalStack::KillServer() { server_->Kill(); }

int LocalStack::server_pid() const { return server_ ? server_->pid() : -1; }

bool LocalStack::RestartServer() {
  // The same port as before, so agents and clients find it where they left it.
  std::vector<std::string> argv = server_argv_;
  const std::string port = url_.substr(url_.rfind(':') + 1);
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--listen") argv[i + 1] = server_host_ + ":" + port;
  }
  server_ = std::make_unique<ChildProcess>();
  const std::string log = dir_ + "/server-" + std::to_string(++server_starts_) + ".log";
  if (common::Status st = server_->Start(argv, log); !st.ok()) {
    std::fprintf(stderr, "server did not restart: %s\n", st.ToString().c_str());
    return false;
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    if (Get("/readyz").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "server did not come back:\n%s\n", ReadAll(log).c_str());
  return false;
}

namespace {

HttpResult ToResult(const httplib::Result& res) {
  HttpResult out;
  if (!res) return out;
  out.status = res->status;
  out.text = res->body;
  out.body = json::parse(res->body, nullptr, false);
  return out;
}

}  // namespace

HttpResult LocalStack::Get(const std::string& path, const std::string& token) {
  httplib::Client c(url_);
  c.set_bearer_token_auth(token.empty() ? admin_token_.c_str() : token.c_str());
  c.set_read_timeout(30, 0);
  return ToResult(c.Get(path.c_str()));
}

LocalStack::Tenant LocalStack::AddTenant(const std::string& name, double weight) {
  Tenant t;
  nlohmann::json body = {{"name", name}};
  if (weight > 0) body["weight"] = weight;
  HttpResult r = Post("/v1/tenants", body.dump());
  EXPECT_EQ(r.status, 201) << r.text;
  if (r.status != 201) return t;
  t.id = r.body["id"].get<int64_t>();
  HttpResult tok = Post("/v1/tokens", nlohmann::json{{"role", "member"},
                                                     {"name", name + "-member"},
                                                     {"tenant_id", t.id}}.dump());
  EXPECT_EQ(tok.status, 201) << tok.text;
  if (tok.status == 201) t.member = tok.body["token"].get<std::string>();
  return t;
}

HttpResult LocalStack::Post(const std::string& path, const std::string& body,
                            const std::string& token) {
  httplib::Client c(url_);
  c.set_bearer_token_auth(token.empty() ? admin_token_.c_str() : token.c_str());
  c.set_read_timeout(30, 0);
  return ToResult(c.Post(path.c_str(), body, "application/json"));
}

HttpResult LocalStack::Delete(const std::string& path, const std::string& token) {
  httplib::Client c(url_);
  c.set_bearer_token_auth(token.empty() ? admin_token_.c_str() : token.c_str());
  c.set_read_timeout(30, 0);
  return ToResult(c.Delete(path.c_str()));
}

json LocalStack::WaitForState(int64_t id, const std::vector<std::string>& states,
                              double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  json job;
  while (std::chrono::steady_clock::now() < end) {
    HttpResult r = Get("/v1/jobs/" + std::to_string(id));
    if (r.status == 200) {
      job = r.body;
      for (const auto& s : states) {
        if (job.value("state", "") == s) return job;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return job;
}

}  // namespace embody_test
