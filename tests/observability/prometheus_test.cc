// A real Prometheus server against a running Embody stack: PostgreSQL + embody-server + two
// agents (LocalStack), Prometheus configured by deploy/prometheus_config.sh from the shipped
// deploy/prometheus.yml (intervals shortened to 1 s), targets found only through the server's
// GET /v1/prometheus/targets. While a training job of a tenant of its own runs, Prometheus' HTTP
// API must show both agents and the server discovered and up, the job's throughput under its job
// id, tenant and node (all three from discovery; Prometheus holds the agents' scrape secret), node
// series for both nodes, and the server's request counter; what a job on a node sees of its
// agent's /metrics must name no job and no tenant. A hostile node, registered with the join token
// like any agent, whose /metrics claims another node's name and the tenant's job, gets neither:
// its labels are kept only as exported_node and exported_job.
//
// Skipped where /usr/bin/prometheus is not installed (Debian package `prometheus`).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/e2e/local_stack.h"

namespace embody_test {
namespace {

using nlohmann::json;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

class PrometheusServer {
 public:
  bool Start(const std::string& config, const std::string& dir) {
    port_ = embody::testing::FreeLoopbackPort();
    log_ = dir + "/prometheus.log";
    common::Status st = child_.Start(
        {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir + "/tsdb",
         "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
        log_);
    if (!st.ok()) return false;
    for (int i = 0; i < 300; ++i) {
      httplib::Client c("127.0.0.1", port_);
      auto r = c.Get("/-/ready");
      if (r && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  int Stop() { return child_.Stop(20); }

  json Api(const std::string& path, const httplib::Params& params = {}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    auto r = c.Get(path, params, httplib::Headers{});
    if (!r || r->status != 200) return nullptr;
    json j = json::parse(r->body, nullptr, false);
    return j.is_discarded() ? json(nullptr) : j;
  }
  // The result vector of an instant query (empty on any failure).
  json Query(const std::string& promql) {
    json j = Api("/api/v1/query", {{"query", promql}});
    if (!j.is_object() || j.value("status", "") != "success") return json::array();
    return j["data"]["result"];
  }
  const std::string& log() const { return log_; }

 private:
  embody::testing::ChildProcess child_;
  int port_ = 0;
  std::string log_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What the test waits for, re-evaluated on every poll; `missing` says what is not there yet.
struct Observed {
  std::set<std::string> agents_up;  // node label of embody-agent targets with health "up"
  bool server_up = false;
  json throughput = json::array();
  std::set<std::string> cpu_nodes, gpu_nodes;
  json requests = json::array();
  bool step_moved = false;
  json forged_node = json::array();  // the hostile node's series that claim node-a
  std::string missing;
};

Observed Observe(PrometheusServer& prom, const std::string& job_id) {
  Observed o;
  json targets = prom.Api("/api/v1/targets");
  if (targets.is_object()) {
    for (const auto& t : targets["data"]["activeTargets"]) {
      const json& l = t["labels"];
      if (t.value("health", "") != "up") continue;
      if (l.value("job", "") == "embody-agent" && l.value("role", "") == "agent" &&
          l.value("node", "") != "node-evil") {
        o.agents_up.insert(l.value("node", ""));
      }
      if (l.value("job", "") == "embody-server" && l.value("role", "") == "server") {
        o.server_up = true;
      }
    }
  }
  o.throughput = prom.Query("embody_job_tokens_per_second{job=\"" + job_id + "\"}");
  for (const auto& s : prom.Query("embody_node_cpu_utilization_ratio")) {
    o.cpu_nodes.insert(s["metric"].value("node", ""));
  }
  for (const auto& s : prom.Query("embody_node_gpus{node!=\"node-evil\"}")) {
    o.gpu_nodes.insert(s["metric"].value("node", ""));
  }
  o.requests = prom.Query("embody_http_requests_total{job=\"embody-server\"}");
  // The step series moves between scrapes: the job is really being followed.
  json moved = prom.Query("max_over_time(embody_job_step{job=\"" + job_id + "\"}[1m]) - " +
                          "min_over_time(embody_job_step{job=\"" + job_id + "\"}[1m])");
  o.step_moved = !moved.empty() && std::stod(moved[0]["value"][1].get<std::string>()) > 0;
  o.forged_node = prom.Query("embody_node_gpus{exported_node=\"node-a\"}");
  const std::set<std::string> both = {"node-a", "node-b"};
  if (o.agents_up != both) o.missing += " agents-up";
  if (!o.server_up) o.missing += " server-up";
  if (o.throughput.empty()) o.missing += " throughput";
  if (o.cpu_nodes != both) o.missing += " cpu";
  if (o.gpu_nodes != both) o.missing += " gpus";
  if (o.requests.empty()) o.missing += " requests";
  if (!o.step_moved) o.missing += " step-moving";
  if (o.forged_node.empty()) o.missing += " hostile-node-scraped";
  return o;
}

// GET http://<agent><path> with `authorization` as the header value (none when empty).
std::string ScrapeAgent(const std::string& host_port, const std::string& authorization,
                        const std::string& path = "/metrics") {
  httplib::Client c("http://" + host_port);
  c.set_read_timeout(10, 0);
  httplib::Headers h;
  if (!authorization.empty()) h.emplace("Authorization", authorization);
  auto r = c.Get(path, h);
  if (!r) return "(no answer from " + host_port + ")";
  if (r->status != 200) return "(status " + std::to_string(r->status) + ")";
  return r->body;
}

// A node that lies: registered with the cluster's join token like any agent and kept UP by its
// heartbeats, its /metrics claims to be node-a and to run `job_id` of `tenant`.
class HostileNode {
 public:
  bool Start(LocalStack& stack, const std::string& job_id, const std::string& tenant) {
    const std::string forged =
        "embody_node_gpus{node=\"node-a\",node_id=\"1\"} 99\n"
        "embody_job_tokens_per_second{job=\"" + job_id + "\",tenant=\"" + tenant +
        "\",node=\"node-a\"} 1e+12\n";
    server_.Get("/metrics", [forged](const httplib::Request&, httplib::Response& res) {
      res.set_content(forged, "text/plain; version=0.0.4");
    });
    const int port = server_.bind_to_any_port("127.0.0.1");
    if (port <= 0) return false;
    listener_ = std::thread([this] { server_.listen_after_bind(); });
    json boot = json::parse(ReadFile(stack.bootstrap_file()), nullptr, false);
    if (!boot.is_object()) return false;
    json reg = {{"name", "node-evil"},
                {"address", "127.0.0.1"},
                {"agent_url", "http://127.0.0.1:" + std::to_string(port)},
                {"cpu_slots", 1},
                {"memory_bytes", 1 << 30}};
    HttpResult r = stack.Post("/v1/agents/register", reg.dump(), boot.value("agent_token", ""));
    if (r.status != 200 && r.status != 201) return false;
    const int64_t id = r.body.value("node_id", int64_t{0});
    const std::string token = r.body.value("node_token", "");
    // Drained: the hostile node never gets a job of the test's.
    stack.Post("/v1/nodes/" + std::to_string(id) + "/drain", "{}");
    beating_ = std::thread([this, &stack, id, token] {
      while (!stop_) {
        stack.Post("/v1/agents/" + std::to_string(id) + "/heartbeat", "{}", token);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
    return true;
  }
  ~HostileNode() {
    stop_ = true;
    if (beating_.joinable()) beating_.join();
    server_.stop();
    if (listener_.joinable()) listener_.join();
  }

 private:
  httplib::Server server_;
  std::thread listener_, beating_;
  std::atomic<bool> stop_{false};
};

bool Has(const std::string& text, const std::string& s) {
  return text.find(s) != std::string::npos;
}

TEST(PrometheusTest, ScrapesServerAndAgentsFoundThroughServiceDiscovery) {
  if (::access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus << " is not installed (Debian package prometheus; "
                 << "deploy/setup.sh installs it)";
  }
  LocalStack stack(2, 1);
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();

  // The shipped template, rendered for this stack; the token comes from the bootstrap JSON.
  const std::string out = stack.dir() + "/prometheus";
  embody::testing::CommandResult rendered = embody::testing::RunCommand(
      {"bash", embody::testing::SourceDir() + "/deploy/prometheus_config.sh", "--server",
       stack.url(), "--token-file", stack.bootstrap_file(), "--metrics-token-file",
       stack.metrics_token_file(), "--out", out, "--scrape-interval", "1s", "--sd-refresh-interval",
       "1s"});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.output;

  PrometheusServer prom;
  ASSERT_TRUE(prom.Start(out + "/prometheus.yml", out)) << "Prometheus did not become ready:\n"
                                                        << ReadFile(prom.log());

  // The job belongs to a tenant whose name appears nowhere else in the stack.
  const std::string tenant = "observed-tenant-" + std::to_string(::getpid());
  HttpResult created = stack.Post("/v1/tenants", json{{"name", tenant}}.dump());
  ASSERT_EQ(created.status, 201) << created.text;
  HttpResult member = stack.Post(
      "/v1/tokens",
      json{{"tenant_id", created.body["id"]}, {"role", "member"}, {"name", "prometheus-test"}}
          .dump());
  ASSERT_EQ(member.status, 201) << member.text;
  const std::string member_token = member.body.value("token", "");

  // Long enough (about 2 ms a step here) to be scraped many times; cancelled once seen.
  json spec = {{"name", "prometheus-e2e"},
               {"kind", "train"},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
               {"engine",
                {{"optim", {{"steps", 30000}, {"lr", 0.001}, {"warmup_steps", 5}}},
                 {"data", {{"rows_per_step", 64}}},
                 {"model", {{"d_model", 128}}}}}};
  HttpResult submitted = stack.Post("/v1/jobs", spec.dump(), member_token);
  ASSERT_EQ(submitted.status, 201) << submitted.text;
  const std::string job_id = std::to_string(submitted.body["id"].get<int64_t>());
  json job = stack.WaitForState(std::stoll(job_id), {"RUNNING", "SUCCEEDED", "FAILED"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);

  HostileNode hostile;
  ASSERT_TRUE(hostile.Start(stack, job_id, tenant));

  Observed seen;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  do {
    seen = Observe(prom, job_id);
    if (seen.missing.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  } while (std::chrono::steady_clock::now() < end);
  job = stack.Get("/v1/jobs/" + job_id).body;
  EXPECT_TRUE(seen.missing.empty())
      << "not seen in Prometheus:" << seen.missing << "\njob state " << job.value("state", "")
      << "\ntargets: " << prom.Api("/api/v1/targets").dump().substr(0, 3000)
      << "\nprometheus log:\n"
      << ReadFile(prom.log()).substr(0, 3000);

  // The job's throughput carries its Embody id as `job`, its tenant and the node it runs on, all
  // from discovery: one series, from the job's own node.
  ASSERT_EQ(seen.throughput.size(), 1u) << seen.throughput.dump(2);
  const json& tps = seen.throughput[0];
  EXPECT_EQ(tps["metric"].value("job", ""), job_id);
  EXPECT_EQ(tps["metric"].value("tenant", ""), tenant);
  EXPECT_EQ(tps["metric"].value("node", ""), job["allocation"][0].value("node", "")) << tps.dump();
  EXPECT_EQ(tps["metric"].value("role", ""), "job") << tps.dump();
  EXPECT_GT(std::stod(tps["value"][1].get<std::string>()), 0.0);
  EXPECT_LT(std::stod(tps["value"][1].get<std::string>()), 1e12);
  // What the hostile node claimed stays its own: its series carry node="node-evil", the claimed
  // names only as exported_*, and node-a's own series are node-a's agent's alone.
  for (const auto& f : seen.forged_node) {
    EXPECT_EQ(f["metric"].value("node", ""), "node-evil") << f.dump();
    EXPECT_EQ(f["metric"].value("job", ""), "embody-agent") << f.dump();
  }
  // A node's own /metrics names no job: a job series from it is forged, and dropped at scrape.
  EXPECT_EQ(prom.Query("embody_job_tokens_per_second{exported_job=\"" + job_id + "\"}"), json::array());
  EXPECT_EQ(prom.Query("count(embody_job_tokens_per_second{tenant=\"" + tenant + "\"})")
                .at(0)["value"][1],
            "1");
  for (const auto& g : prom.Query("embody_node_gpus{node=\"node-a\"}")) {
    EXPECT_EQ(g["value"][1].get<std::string>(), "0") << g.dump();
  }

  // Each agent's /metrics as a job on its node reads it (no secret, or a guessed one): the node's
  // series and nothing that names a job or a tenant, with or without the secret. A job's series
  // answer at /metrics/jobs/ID to the secret only, from the job's agent only, and carry no
  // label naming the job, its tenant or the node.
  HttpResult targets = stack.Get("/v1/prometheus/targets");
  ASSERT_EQ(targets.status, 200) << targets.text;
  int agents = 0, job_targets = 0, authorised_with_job = 0;
  const std::string job_path = "/metrics/jobs/" + job_id;
  for (const auto& group : targets.body) {
    const std::string role = group["labels"].value("role", "");
    if (role == "job") {
      ++job_targets;
      EXPECT_EQ(group["labels"].value("job", ""), job_id) << group.dump();
      EXPECT_EQ(group["labels"].value("tenant", ""), tenant) << group.dump();
      EXPECT_EQ(group["labels"].value("__metrics_path__", ""), job_path) << group.dump();
    }
    if (role != "agent" || group["labels"].value("node", "") == "node-evil") continue;
    const std::string agent = group["targets"][0].get<std::string>();
    ++agents;
    for (const std::string& authorization :
         {std::string(), "Bearer " + member_token, "Bearer " + stack.admin_token(),
          "Bearer " + stack.metrics_token()}) {
      std::string body = ScrapeAgent(agent, authorization);
      EXPECT_TRUE(Has(body, "embody_node_cpu_utilization_ratio")) << agent << "\n" << body;
      for (const std::string& leak : {std::string("job="), std::string("tenant="), tenant}) {
        EXPECT_FALSE(Has(body, leak)) << agent << " leaks " << leak << "\n" << body;
      }
    }
    for (const std::string& authorization :
         {std::string(), "Bearer " + member_token, "Bearer " + stack.admin_token()}) {
      EXPECT_EQ(ScrapeAgent(agent, authorization, job_path), "(status 401)") << authorization;
    }
    std::string body = ScrapeAgent(agent, "Bearer " + stack.metrics_token(), job_path);
    EXPECT_FALSE(Has(body, "{job=")) << body;
    EXPECT_FALSE(Has(body, tenant)) << body;
    if (Has(body, "\nembody_job_tokens_per_second ")) ++authorised_with_job;
  }
  EXPECT_EQ(agents, 2) << targets.text;
  EXPECT_EQ(job_targets, 1) << targets.text;
  EXPECT_EQ(authorised_with_job, 1) << "the job's agent with the scrape secret";
  // The server's series come from the server target: routes are patterns, never raw paths.
  bool heartbeat_route = false;
  for (const auto& s : seen.requests) {
    EXPECT_EQ(s["metric"].value("role", ""), "server") << s.dump();
    heartbeat_route |= s["metric"].value("route", "") == "/v1/agents/{id}/heartbeat";
  }
  EXPECT_TRUE(heartbeat_route);
  // The alert rules loaded and evaluate without errors.
  json rules = prom.Api("/api/v1/rules");
  ASSERT_TRUE(rules.is_object());
  int evaluated = 0;
  for (const auto& g : rules["data"]["groups"]) {
    for (const auto& r : g["rules"]) {
      EXPECT_EQ(r.value("health", ""), "ok") << r.dump();
      evaluated += r.value("health", "") == "ok";
    }
  }
  EXPECT_GE(evaluated, 5);

  HttpResult cancel = stack.Post("/v1/jobs/" + job_id + "/cancel", "{}");
  EXPECT_EQ(cancel.status, 200) << cancel.text;
  job = stack.WaitForState(std::stoll(job_id), {"CANCELLED", "SUCCEEDED", "FAILED"}, 60);
  EXPECT_NE(job.value("state", ""), "FAILED") << job.dump(2);
  EXPECT_EQ(prom.Stop(), 0) << ReadFile(prom.log()).substr(0, 3000);
}

}  // namespace
}  // namespace embody_test
