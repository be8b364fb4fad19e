// A whole Embody cluster on loopback for end-to-end tests: a private PostgreSQL, embody-server
// and N agents, each a real child process of the test, stopped (and waited for) on destruction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/pg_harness.h"

namespace embody_test {

using embody::testing::ChildProcess;
using embody::testing::PgCluster;

struct HttpResult {
  int status = 0;  // 0: no connection
  nlohmann::json body;
  std::string text;
};

// Pids of live processes whose environment or command line contains `needle`.
std::vector<int> ProcessesWith(const std::string& needle);

class LocalStack {
 public:
  explicit LocalStack(int agents = 2, int slots_per_agent = 1);
  ~LocalStack();

  // More embody-server flags (e.g. {"--preempt-min-priority", "90"}); call before Start().
  void AddServerFlags(const std::vector<std::string>& flags) {
    server_flags_.insert(server_flags_.end(), flags.begin(), flags.end());
  }
  // More embody-agent flags, for every agent (e.g. {"--dataset-root", DIR}); before Start().
  void AddAgentFlags(const std::vector<std::string>& flags) {
    agent_flags_.insert(agent_flags_.end(), flags.begin(), flags.end());
  }

  // The server's --heartbeat-interval-ms, before Start(): 500 unless set, faster than the 1 s
  // default, and a node is DOWN only after 1.5 s of silence, which a loaded CI machine needs.
  void SetHeartbeatIntervalMs(int ms) { heartbeat_interval_ms_ = ms; }

  // The server listens on `host` (default 127.0.0.1), e.g. an address agents in network
  // namespaces reach; before Start().
  void SetServerHost(const std::string& host) { server_host_ = host; }
  // Agent `i` runs as `prefix... embody-agent ...` (e.g. {"ip", "netns", "exec", "ns"}) with
  // --address and --listen on `address` instead of 127.0.0.1; before Start().
  void PlaceAgent(int i, std::vector<std::string> prefix, const std::string& address) {
    if (static_cast<int>(agent_places_.size()) <= i) agent_places_.resize(i + 1);
    agent_places_[i] = {std::move(prefix), address};
  }

  // Gives the server and every agent `--dataset-root <dir>/datasets` (made here, 0755), the
  // shared directory where imported dataset versions live; call before Start().
  void EnableDatasetRoot();
  // Empty unless EnableDatasetRoot() was called.
  const std::string& dataset_root() const { return dataset_root_; }

  // Starts everything and waits until every agent is UP. Returns false (with details logged to
  // stderr) if something does not come up.
  bool Start();

  // Each with the admin token, or with `token` where one is given.
  HttpResult Get(const std::string& path, const std::string& token = "");
  HttpResult Post(const std::string& path, const std::string& body, const std::string& token = "");
  // POST /v1/jobs with the admin token: the new job's id, or -1 after a test failure naming the
  // answer when it is not 201.
  int64_t SubmitJob(const nlohmann::json& spec);
  // GET /v1/jobs/{id}/logs?rank=R: the rank's log (R -1: the launcher's), or the error's text.
  std::string JobLog(int64_t id, int rank);
  HttpResult Delete(const std::string& path, const std::string& token = "");
  // A tenant named `name` (of `weight` where it is above 0) made by the admin, and a member
  // token of it; id 0 (the refusal reported as a test failure) where the server refuses.
  struct Tenant {
    int64_t id = 0;
    std::string member;
  };
  Tenant AddTenant(const std::string& name, double weight = 0);
  // Polls GET /v1/jobs/{id} until its state is one of `states` or `timeout_s` passes.
  nlohmann::json WaitForState(int64_t id, const std::vector<std::string>& states, double timeout_s);

  // Node loss: SIGKILLs agent `i` (node-a is 0) and every process of the jobs it ran, so the
  // server hears nothing more from that node.
  void LoseNode(int i);
  // The agent alone is SIGKILLed: the processes of its jobs are left to fend for themselves.
  void KillAgent(int i);
  // Starts agent `i` again as it was started first (same data directory and flags), its output
  // in restarted_agent_log(i). Call after KillAgent(i).
  bool RestartAgent(int i);
  std::string restarted_agent_log(int i) const {
    return dir_ + "/agent-node-" + std::string(1, static_cast<char>('a' + i)) + "-restarted.log";
  }
  // LoseNode, then the node's disk goes too: agent `i`'s data directory (its checkpoints
  // included) is removed.
  void LoseNodeAndDisk(int i);
  // Deletes agent `i`'s job network table (as its machine's loss would), if there is one.
  void RemoveJobNetworkTable(int i);
  std::string agent_data_dir(int i) const {
    return dir_ + "/agents/node-" + std::string(1, static_cast<char>('a' + i));
  }

  // The server killed with SIGKILL (no clean-up of its own), then started again on the same
  // address, PostgreSQL and data directory; RestartServer waits until it answers /readyz.
  void KillServer();
  bool RestartServer();
  int server_pid() const;

  const std::string& url() const { return url_; }
  // Where embody-server, embody-agent, embody-engine, embody-data and the `embody` CLI are.
  static std::string bin_dir();
  // A small 1-node training job of 600 steps that checkpoints every 25 and may restart once:
  // what the fault tests take nodes and agents away under.
  static nlohmann::json ResumableTrainSpec(const std::string& name);
  const std::string& dir() const { return dir_; }
  const std::string& admin_token() const { return admin_token_; }
  // The stack's PostgreSQL, for tests that seed rows directly (after Start()).
  const PgCluster& pg() const { return *pg_; }
  // The server's bootstrap JSON ({"admin_token", "agent_token", "tenant"}), mode 0600.
  std::string bootstrap_file() const { return dir_ + "/bootstrap.json"; }
  // The agents' scrape secret (--metrics-token-file), random per stack, mode 0600: what
  // Prometheus sends to read the agents' per-job series.
  std::string metrics_token_file() const { return dir_ + "/metrics.token"; }
  const std::string& metrics_token() const { return metrics_token_; }
  // Where each process writes its output (JSON log lines).
  std::string server_log() const { return dir_ + "/server.log"; }
  std::string agent_log(int i) const {
    return dir_ + "/agent-node-" + std::string(1, static_cast<char>('a' + i)) + ".log";
  }

 private:
  int agents_;
  int slots_;
  std::vector<std::string> server_flags_;
  std::vector<std::string> agent_flags_;
  std::string server_host_ = "127.0.0.1";
  int heartbeat_interval_ms_ = 500;
  struct AgentPlace {
    std::vector<std::string> prefix;
    std::string address;
  };
  std::vector<AgentPlace> agent_places_;
  std::string dir_;
  std::string dataset_root_;
  std::string url_;
  std::string admin_token_;
  std::string metrics_token_;
  std::unique_ptr<PgCluster> pg_;
  std::unique_ptr<ChildProcess> server_;
  std::vector<std::string> server_argv_;
  int server_starts_ = 0;
  std::vector<std::unique_ptr<ChildProcess>> agent_procs_;
  std::vector<std::vector<std::string>> agent_argv_;
};

}  // namespace embody_test
