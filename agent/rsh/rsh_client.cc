#include "agent/rsh/rsh_client.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "api/launch_env.h"
#include "agent/rsh/rsh_protocol.h"
#include "common/file_util.h"
#include "common/http/client.h"
#include "common/parse_int.h"

namespace agent {
namespace {

constexpr int kLauncherFailed = 255;
// The agent sends a keepalive frame every second while the daemon is silent; this much silence
// means the other node (or the network to it) is gone.
constexpr int kReadTimeoutS = 30;
// The other node's agent learns of its part in the job from its own heartbeats, which may come
// after the head's launch: a refusal for a job it does not know yet (404), for the attempt it
// knew before (401), or while it still prepares the job's image (503; the head waited for it,
// agent/images/peer_images.h), is asked again for this long before the launch fails.
constexpr int kAssignmentWaitMs = 15'000;

int Fail(const std::string& message) {
  std::fprintf(stderr, "embody-agent rsh: %s\n", message.c_str());
  return kLauncherFailed;
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int RshMain(const std::vector<std::string>& args) {
  auto inv = ParseRshArgs(args);
  if (!inv.ok()) return Fail(inv.status().message());
  const char* job = std::getenv(api::kEnvJobId);
  const char* token = std::getenv(api::kEnvJobToken);
  if (job == nullptr || token == nullptr || *token == '\0') {
    return Fail("EMBODY_JOB_ID and EMBODY_JOB_TOKEN must be set (mpirun of an Embody job)");
  }
  auto job_id = common::ParseInt64(job, 1, INT64_MAX);
  if (!job_id.ok()) return Fail("bad EMBODY_JOB_ID");
  auto hosts_text = common::ReadFile(inv->hosts_file);
  if (!hosts_text.ok()) return Fail(hosts_text.status().message());
  auto hosts = nlohmann::json::parse(*hosts_text, nullptr, /*allow_exceptions=*/false);
  if (hosts.is_discarded() || !hosts.is_object()) return Fail(inv->hosts_file + " is not a JSON object");
  auto url = hosts.find(inv->host);
  if (url == hosts.end() || !url->is_string()) {
    return Fail("host " + inv->host + " is not one of this job's nodes");
  }

  httplib::Client client(url->get<std::string>());
  if (common::Status secure =
          common::http::VerifyServer(client, url->get<std::string>(), inv->ca_file);
      !secure.ok()) {
    return Fail(secure.message());
  }
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(kReadTimeoutS, 0);
  client.set_write_timeout(10, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/local/jobs/" + std::to_string(*job_id) + "/rsh";
  req.headers = {{"Authorization", std::string("Bearer ") + token}};
  req.set_header("Content-Type", "application/json");
  req.body = nlohmann::json{{"argv", inv->words}}.dump();

  int status = 0;
  std::string refusal;
  std::optional<int> exit_code;
  std::string broken;
  int waited_ms = 0;
  for (int pause_ms = 100;; pause_ms = std::min(pause_ms * 2, 1000)) {
    FrameDecoder decoder;
    status = 0;
    refusal.clear();
    req.response_handler = [&](const httplib::Response& res) {
      status = res.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (status != 200) {
        if (refusal.size() < 4096) refusal.append(data, std::min<size_t>(n, 4096));
        return true;
      }
      decoder.Feed(data, n);
      while (true) {
        auto f = decoder.Next();
        if (!f.ok()) {
          broken = f.status().message();
          return false;
        }
        if (!*f) return true;
        const Frame& frame = **f;
        if (frame.type == FrameType::kOutput && !WriteAll(STDOUT_FILENO, frame.payload)) {
          broken = "cannot write the daemon's output";
          return false;
        }
        if (frame.type == FrameType::kExit) {
          auto code = common::ParseInt(frame.payload, 0, 255);
          exit_code = code.ok() ? static_cast<int>(*code) : kLauncherFailed;
        }
      }
    };
    auto res = client.send(req);
    if ((status == 404 || status == 401 || status == 503) && waited_ms < kAssignmentWaitMs && !exit_code &&
        broken.empty()) {
      ::usleep(static_cast<useconds_t>(pause_ms) * 1000);
      waited_ms += pause_ms;
      continue;
    }
    if (exit_code) return *exit_code;
    if (!broken.empty()) return Fail(broken);
    if (status != 0 && status != 200) {
      return Fail(inv->host + " refused the daemon (HTTP " + std::to_string(status) + "): " + refusal);
    }
    if (!res) return Fail("no answer from " + url->get<std::string>() + ": " + httplib::to_string(res.error()));
    return Fail("the stream from " + inv->host + " ended before the daemon's exit");
  }
}

}  // namespace agent
