// The agent's bearer token towards the server: the cluster join token it was started with
// (--token / --token-file), or the node credential the server issued at registration.
//
// A node credential is kept in <data-dir>/node.token (0600, written atomically) and used for
// every call, registrations after a restart included. When the server refuses it (401: revoked,
// or a server that lost its database) the agent forgets it and registers with the join token
// again. A server that issues none (RegisterResponse::node_token empty) leaves the join token in
// use. A token is one word of at most kMaxTokenBytes printable characters: anything else read
// from the file or the server is refused, since it goes into an HTTP header. Thread-safe.
#pragma once

#include <mutex>
#include <string>

#include "common/status.h"

namespace agent {

class NodeCredential {
 public:
  static constexpr size_t kMaxTokenBytes = 512;

  NodeCredential(std::string join_token, std::string path);

  // Reads the node credential from the file when there is one; a malformed file is ignored (the
  // join token is used) and reported.
  common::Status Load();
  std::string Bearer() const;  // the node credential when there is one, else the join token
  bool HasNodeToken() const;
  // Stores and starts using `node_token` (invalid_argument if it is not a well-formed token).
  common::Status Adopt(const std::string& node_token);
  // Back to the join token; the file is removed.
  void Forget();

  static bool WellFormed(const std::string& token);

 private:
  const std::string join_token_;
  const std::string path_;
  mutable std::mutex mu_;
  std::string node_token_;
};

}  // namespace agent
