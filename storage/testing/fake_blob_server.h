// FakeBlobServer: an in-memory twin of embody-server's checkpoint blob routes
// (checkpoint_http_store.h), on loopback port 0, for testing HttpCheckpointStore without a
// database. It keeps the server's rules that the client relies on (offset must equal the bytes
// held, per-chunk SHA-256, commit checks size and SHA-256 and discards a mismatching upload, only
// ready checkpoints are listed, Range downloads) and can be told to fail in the ways a network
// and a disk do. No authentication: the token is recorded, not checked.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
}

namespace storage::testing {

class FakeBlobServer {
 public:
  FakeBlobServer();
  ~FakeBlobServer();
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Faults, each consumed once per request it affects.
  std::atomic<int> fail_puts_before_append{0};  // 503, chunk not stored
  std::atomic<int> fail_puts_after_append{0};   // chunk stored, then 503 (the reply is "lost")
  std::atomic<int> corrupt_next_chunks{0};      // one byte flipped as the chunk is stored
  std::atomic<int> cut_downloads{0};  // half the requested bytes, then the connection drops
  std::atomic<int> puts{0};           // chunks received (counting refused ones)

  // Every upload, ready or not, as the server holds it: {"state","received_bytes",...}.
  nlohmann::json Uploads() const;

 private:
  struct Blob {
    int64_t job_id = 0;
    int64_t step = 0;
    int64_t bytes = 0;
    std::string sha256;
    nlohmann::json metrics;
    std::string data;
    bool ready = false;
  };
  nlohmann::json EntryJson(int64_t id, const Blob& b) const;

  mutable std::mutex mu_;
  std::map<int64_t, Blob> blobs_;
  int64_t next_id_ = 1;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace storage::testing
