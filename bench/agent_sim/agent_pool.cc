#include "bench/agent_sim/agent_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "common/http/client.h"
#include "common/request_id.h"
#include "common/time_util.h"

namespace bench {

namespace {

using common::Status;
using nlohmann::json;

constexpr double kFirstBackoffS = 0.5;
constexpr double kMaxBackoffS = 30;
constexpr double kConnectTimeoutS = 3;
constexpr double kIoTimeoutS = 15;  // as agent/heartbeat/server_client.cc

// The agent protocol over a new connection per call ("Connection: close"): what an agent costs
// the server when it holds no connection between heartbeats. Same requests, bodies and decoding
// as agent::HttpServerChannel.
class ConnectionPerCallChannel : public agent::ServerChannel {
 public:
  ConnectionPerCallChannel(std::string url, const agent::NodeCredential* credential)
      : url_(std::move(url)), credential_(credential) {}

  common::Result<api::RegisterResponse> Register(const api::RegisterRequest& req) override {
    auto reply = PostJson("/v1/agents/register", api::ToJson(req));
    if (!reply.ok()) return reply.status();
    return api::ParseRegisterResponse(*reply);
  }
  common::Result<api::HeartbeatResponse> Heartbeat(int64_t node_id,
                                                   const api::HeartbeatRequest& req) override {
    auto reply = PostJson("/v1/agents/" + std::to_string(node_id) + "/heartbeat", api::ToJson(req));
    if (!reply.ok()) return reply.status();
    return api::ParseHeartbeatResponse(*reply);
  }

 private:
  common::Result<json> PostJson(const std::string& path, const json& body) {
    EMBODY_ASSIGN_OR_RETURN(
        client, common::http::Client::Create(
                    {url_, kConnectTimeoutS, kIoTimeoutS, kIoTimeoutS, credential_->Bearer(),
                     /*ca_file=*/""}));
    common::http::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    req.headers.push_back({"Connection", "close"});
    EMBODY_ASSIGN_OR_RETURN(res, client->Call(req));
    json reply = json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    if (reply.is_discarded()) return common::Unavailable("server sent malformed JSON");
    return reply;
  }

  const std::string url_;
  const agent::NodeCredential* const credential_;
};

// 10.a.b.c for agent i: every simulated node has an address of its own, as on a real cluster.
std::string AddressOf(int i) {
  return "10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) + "." +
         std::to_string(i & 255);
}

}  // namespace

struct AgentPool::Agent {
  Agent(std::string name, double job_seconds, std::string join_token, std::string token_path)
      : sim(std::move(name), job_seconds),
        credential(std::move(join_token), std::move(token_path)) {}
  SimAgent sim;
  agent::NodeCredential credential;
  std::unique_ptr<agent::ServerChannel> channel;
  api::RegisterRequest node;
  int64_t node_id = 0;  // 0: not registered
  double interval_s = 1;
  int failures = 0;
  double last_ok = 0;  // end of the last answered heartbeat; 0: none yet
  std::minstd_rand rng;
};

AgentPool::AgentPool(AgentPoolOptions options, SimStats* stats, JobObserver* observer)
    : options_(std::move(options)), stats_(stats), observer_(observer) {
  for (int i = 0; i < options_.agents; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "%s-%05d", options_.name_prefix.c_str(), i);
    auto a = std::make_unique<Agent>(name, options_.job_seconds, options_.join_token,
                                     options_.credential_dir + "/" + name + ".token");
    if (options_.keep_alive) {
      a->channel = std::make_unique<agent::HttpServerChannel>(options_.server_url,
                                                              /*ca_file=*/"", &a->credential);
    } else {
      a->channel = std::make_unique<ConnectionPerCallChannel>(options_.server_url, &a->credential);
    }
    a->node.name = name;
    a->node.address = AddressOf(i + 1);
    a->node.agent_url = "http://" + a->node.address + ":9100";
    a->node.cpu_slots = options_.cpu_slots;
    a->node.memory_bytes = options_.memory_bytes;
    a->node.isolation.unprivileged_uid = true;
    a->node.isolation.cgroup = "v2";
    a->node.isolation.rlimits = true;
    a->rng.seed(static_cast<unsigned>(i + 1));
    agents_.push_back(std::move(a));
  }
}

AgentPool::~AgentPool() { Stop(); }

void AgentPool::Start() {
  const double now = common::MonotonicSeconds();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < static_cast<int>(agents_.size()); ++i) queue_.push({now, i});
  }
  for (int t = 0; t < options_.threads; ++t) threads_.emplace_back([this] { Work(); });
}

void AgentPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void AgentPool::SetPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
}

int64_t AgentPool::repeated_launches() const {
  int64_t n = 0;
  for (const auto& a : agents_) n += a->sim.repeated_launches();
  return n;
}

void AgentPool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const Due next = queue_.top();
    const double now = common::MonotonicSeconds();
    if (next.at > now) {
      cv_.wait_for(lock, std::chrono::duration<double>(next.at - now));
      continue;
    }
    queue_.pop();
    lock.unlock();
    const double at = Step(*agents_[next.index], next.at);
    lock.lock();
    queue_.push({at, next.index});
    // Another worker may be waiting for a later agent than this one.
    if (queue_.top().index == next.index) cv_.notify_one();
  }
}

double AgentPool::Backoff(Agent& a) {
  const double cap =
      std::min(kMaxBackoffS, kFirstBackoffS * std::pow(2.0, std::min(a.failures - 1, 16)));
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return common::MonotonicSeconds() + cap * jitter(a.rng);
}

double AgentPool::Step(Agent& a, double due) {
  const double start = common::MonotonicSeconds();
  std::string phase;
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase = phase_;
  }
  stats_->Sample("lateness", start - due);
  if (a.node_id == 0) {
    auto reply = a.channel->Register(a.node);
    const double end = common::MonotonicSeconds();
    if (!reply.ok()) {
      stats_->Error(std::string("register: ") + common::CodeName(reply.status().code()));
      if (reply.status().code() == common::Code::kUnauthenticated) a.credential.Forget();
      ++a.failures;
      return Backoff(a);
    }
    stats_->Sample("register", end - start);
    if (!reply->node_token.empty()) {
      if (Status st = a.credential.Adopt(reply->node_token); !st.ok()) {
        stats_->Error("register: bad node token");
      }
    }
    a.node_id = reply->node_id;
    a.interval_s = std::max(0.05, reply->heartbeat_interval_ms / 1000.0);
    a.failures = 0;
    ++registered_;
    return end;  // the first heartbeat at once, as the real agent's next round
  }
  const api::HeartbeatRequest req = a.sim.Build(start);
  auto reply = a.channel->Heartbeat(a.node_id, req);
  const double end = common::MonotonicSeconds();
  if (!reply.ok()) {
    const common::Code code = reply.status().code();
    stats_->Error(std::string("heartbeat: ") + common::CodeName(code));
    if (code == common::Code::kNotFound || code == common::Code::kUnauthenticated) {
      if (code == common::Code::kUnauthenticated) a.credential.Forget();
      a.node_id = 0;
      --registered_;
    }
    ++a.failures;
    return Backoff(a);
  }
  a.failures = 0;
  ++heartbeats_;
  if (a.last_ok > 0) {
    const double silence = end - a.last_ok;
    stats_->Sample("silence", silence);
    if (silence > 3 * a.interval_s) {
      // Only what the server took counts against it: a heartbeat this process started late
      // (every driving thread busy, or short of CPU) leaves a gap of the simulator's own.
      if (silence - std::max(0.0, start - due) > 3 * a.interval_s) {
        ++down_gaps_;
      } else {
        ++late_gaps_;
      }
    }
  }
  a.last_ok = end;
  stats_->Sample("heartbeat", end - start);
  if (!phase.empty()) stats_->Sample("heartbeat/" + phase, end - start);
  a.sim.Commit(req, *reply, end, observer_);
  // As agent/heartbeat/heartbeat_loop.cc: after a launch or a kill, or after reporting an end, the next
  // heartbeat goes at once (a launch's acknowledgement and its RUNNING wait on it).
  bool again = !req.finished.empty();
  for (const api::Command& c : reply->commands) {
    again = again || c.type != api::Command::Type::kWorker;
  }
  if (again) return end;
  return std::min(end + a.interval_s, std::max(end, a.sim.NextJobEnd()));
}

}  // namespace bench
