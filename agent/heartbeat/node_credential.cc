#include "agent/heartbeat/node_credential.h"

#include <unistd.h>

#include "common/file_util.h"

namespace agent {

NodeCredential::NodeCredential(std::string join_token, std::string path)
    : join_token_(std::move(join_token)), path_(std::move(path)) {}

bool NodeCredential::WellFormed(const std::string& token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return false;
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;  // printable ASCII, no blank: safe in a header
  }
  return true;
}

common::Status NodeCredential::Load() {
  if (::access(path_.c_str(), F_OK) != 0) return common::Status::Ok();
  auto text = common::ReadFile(path_);
  if (!text.ok()) return text.status();
  std::string token = *text;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (!WellFormed(token)) {
    return common::InvalidArgument(path_ + " does not hold a node credential; using the join token");
  }
  std::lock_guard<std::mutex> lock(mu_);
  node_token_ = token;
  return common::Status::Ok();
}

std::string NodeCredential::Bearer() const {
  std::lock_guard<std::mutex> lock(mu_);
  return node_token_.empty() ? join_token_ : node_token_;
}

bool NodeCredential::HasNodeToken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !node_token_.empty();
}

common::Status NodeCredential::Adopt(const std::string& node_token) {
  if (!WellFormed(node_token)) {
    return common::InvalidArgument("the server sent a malformed node credential");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    node_token_ = node_token;
  }
  // In use from now on even if it cannot be stored: the agent then registers with the join
  // token after its next restart.
  return common::WriteFileAtomic(path_, node_token + "\n", 0600);
}

void NodeCredential::Forget() {
  std::lock_guard<std::mutex> lock(mu_);
  node_token_.clear();
  ::unlink(path_.c_str());
}

}  // namespace agent
