#include "agent/images/peer_images.h"

#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/http/client.h"
#include "common/log.h"

namespace agent {
namespace {

enum class PeerState { kReady, kPreparing, kUnknown };

// One question to one node. kUnknown: it does not know its part (yet), or did not answer;
// `why` says which.
common::Result<PeerState> Ask(common::http::Client& client, int64_t job_id, std::string* why) {
  common::http::Request req;
  req.path = "/v1/local/jobs/" + std::to_string(job_id) + "/image";
  auto res = client.Call(req);
  if (!res.ok()) {
    const common::Code code = res.status().code();
    if (code == common::Code::kNotFound || code == common::Code::kUnauthenticated ||
        code == common::Code::kUnavailable) {
      *why = res.status().message();
      return PeerState::kUnknown;
    }
    return res.status();  // its reason: it cannot prepare the image
  }
  auto body = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("ready") || !body["ready"].is_boolean()) {
    return common::Internal("answered without \"ready\"");
  }
  return body["ready"].get<bool>() ? PeerState::kReady : PeerState::kPreparing;
}

}  // namespace

common::Status WaitForImageOnNodes(const PeerImageWait& wait, const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  struct Peer {
    const api::HostSlot* node;
    std::unique_ptr<common::http::Client> client;
    Clock::time_point known_since{};  // when it last said anything but kUnknown
    std::string why_unknown;          // what it said last time it was kUnknown
  };
  std::vector<Peer> peers;
  for (const api::HostSlot& n : wait.nodes) {
    if (n.agent_url.empty()) {
      return common::FailedPrecondition("node " + n.name + " has no agent URL to ask for image " +
                                        wait.image);
    }
    common::http::ClientOptions opts;
    opts.base_url = n.agent_url;
    opts.ca_file = wait.ca_file;
    opts.bearer_token = wait.job_token;
    opts.connect_timeout_s = 5;
    opts.read_timeout_s = 10;
    auto client = common::http::Client::Create(opts);
    if (!client.ok()) {
      return common::FailedPrecondition("node " + n.name + ": " + client.status().message());
    }
    peers.push_back({&n, std::move(*client), start, ""});
  }
  std::set<size_t> waiting;
  for (size_t i = 0; i < peers.size(); ++i) waiting.insert(i);
  while (true) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      Peer& p = peers[*it];
      auto state = Ask(*p.client, wait.job_id, &p.why_unknown);
      if (!state.ok()) {
        return common::FailedPrecondition("node " + p.node->name + ": " + state.status().message());
      }
      const auto now = Clock::now();
      if (*state == PeerState::kReady) {
        it = waiting.erase(it);
        continue;
      }
      if (*state == PeerState::kPreparing) p.known_since = now;
      if (*state == PeerState::kUnknown && now - p.known_since > wait.unknown_grace) {
        return common::FailedPrecondition(
            "node " + p.node->name + " was not known to prepare image " + wait.image + " within " +
            std::to_string(wait.unknown_grace.count()) + " ms of asking: " + p.why_unknown);
      }
      ++it;
    }
    if (waiting.empty()) return common::Status::Ok();
    if (Clock::now() - start > wait.timeout) {
      return common::FailedPrecondition("node " + peers[*waiting.begin()].node->name +
                                        " was still preparing image " + wait.image + " after " +
                                        std::to_string(wait.timeout.count()) + " ms");
    }
    if (stop()) return common::Unavailable("stopped waiting for image " + wait.image);
    std::this_thread::sleep_for(wait.poll);
  }
}

}  // namespace agent
