// LocalHttpServer: an httplib::Server for tests, on a free loopback port (never a fixed one) and
// its own thread, stopped when destroyed. Routes go on server() before Start(). TCP_NODELAY is
// on: an answer's headers and body go out apart, and Nagle would hold each call ~40 ms.
// Test code only (it includes <httplib.h>).
#pragma once

#include <httplib.h>

#include <string>
#include <thread>

namespace common::testing {

class LocalHttpServer {
 public:
  LocalHttpServer() { server_.set_tcp_nodelay(true); }
  ~LocalHttpServer() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  LocalHttpServer(const LocalHttpServer&) = delete;
  LocalHttpServer& operator=(const LocalHttpServer&) = delete;

  httplib::Server& server() { return server_; }
  void Start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace common::testing
