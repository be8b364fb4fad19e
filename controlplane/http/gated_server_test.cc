// GatedServer on loopback (no database): idle and slow-loris clients do not starve the workers
// (and the same clients do starve plain httplib, so the measurement can tell), slow headers and
// idle connections are cut off on time, and requests still work: keep-alive, pipelining, bodies,
// oversize headers.
#include "controlplane/http/gated_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/slow_clients.h"

namespace controlplane::http {
namespace {

using Clock = std::chrono::steady_clock;

// Reads until the peer closes or `wait_s` passes; `closed` says which.
std::string ReadUntilClosed(int fd, double wait_s, bool* closed) {
  timeval tv{static_cast<time_t>(wait_s), static_cast<suseconds_t>((wait_s - int(wait_s)) * 1e6)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  *closed = false;
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) *closed = true;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

void AddRoutes(httplib::Server& s) {
  s.Get("/ping", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("pong", "text/plain");
  });
  s.Post("/size", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(std::to_string(req.body.size()), "text/plain");
  });
}

// A server on its own thread, stopped on destruction.
template <typename S>
struct Running {
  template <typename... A>
  explicit Running(A&&... args) : server(std::forward<A>(args)...) {
    AddRoutes(server);
    port = server.bind_to_any_port("127.0.0.1");
    if constexpr (std::is_same_v<S, GatedServer>) server.SetListenBacklog(1024);
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Running() {
    server.stop();
    if constexpr (std::is_same_v<S, GatedServer>) server.StopGate();
    thread.join();
  }
  S server;
  int port = 0;
  std::thread thread;
};

// The slowest of `n` GETs /ping on fresh connections, in seconds; 1e9 when one fails.
double SlowestPing(int port, int n) {
  double slowest = 0;
  for (int i = 0; i < n; ++i) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(2, 0);
    c.set_connection_timeout(2, 0);
    auto start = Clock::now();
    auto res = c.Get("/ping");
    double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (!res || res->status != 200 || res->body != "pong") return 1e9;
    slowest = std::max(slowest, s);
  }
  return slowest;
}

GateOptions SmallGate() {
  GateOptions o;
  o.workers = 2;
  o.header_timeout_ms = 3000;
  o.keep_alive_timeout_ms = 3000;
  return o;
}

TEST(GatedServerTest, IdleAndSlowClientsDoNotStarveTheWorkers) {
  // Plain httplib with as many threads: the same clients take every worker, so a request waits
  // past its 2 s timeout. This is what the gate is for, and shows the measurement can fail.
  {
    struct Plain : httplib::Server {
      Plain() { new_task_queue = [] { return new httplib::ThreadPool(2); }; }
    };
    Running<Plain> plain;
    embody_test::SlowClients hogs(plain.port, 0, 4, "/ping", std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_GE(SlowestPing(plain.port, 1), 2.0) << "plain httplib was not starved";
  }
  // Gated, with 2 workers: 100 idle and 100 slow-loris connections, requests still answer fast.
  Running<GatedServer> gated(SmallGate());
  embody_test::SlowClients hogs(gated.port, 100, 100, "/ping", std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_GE(gated.server.OpenConnections(), 200u);
  EXPECT_LT(SlowestPing(gated.port, 20), 0.5);
}

TEST(GatedServerTest, SlowHeadersAndIdleConnectionsAreClosedOnTime) {
  Running<GatedServer> gated(SmallGate());
  embody_test::SlowClients hogs(gated.port, 1, 1, "/ping", std::chrono::milliseconds(100));
  auto start = Clock::now();
  bool closed = false;
  ReadUntilClosed(hogs.loris_fd(0), 6, &closed);
  double loris_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_TRUE(closed) << "a request whose headers never end was kept open";
  EXPECT_GT(loris_s, 2.5);
  EXPECT_LT(loris_s, 4.5);
  ReadUntilClosed(hogs.idle_fd(0), 2, &closed);
  EXPECT_TRUE(closed) << "an idle connection was kept past its keep-alive time";
  for (int i = 0; i < 50 && gated.server.OpenConnections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(gated.server.OpenConnections(), 0u);
}

TEST(GatedServerTest, RequestsWorkThroughTheGate) {
  Running<GatedServer> gated(SmallGate());
  // Keep-alive: one connection for several requests, bodies included.
  httplib::Client c("127.0.0.1", gated.port);
  c.set_keep_alive(true);
  for (int i = 0; i < 3; ++i) {
    auto res = c.Post("/size", std::string(100000 + i, 'x'), "text/plain");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->body, std::to_string(100000 + i));
  }
  EXPECT_EQ(gated.server.OpenConnections(), 1u);
  // Two requests in one write, the second split across the first's body: both answered.
  int fd = embody_test::ConnectLoopback(gated.port);
  std::string two =
      "POST /size HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
      "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(fd, two.data(), two.size(), MSG_NOSIGNAL), static_cast<ssize_t>(two.size()));
  bool closed = false;
  std::string got = ReadUntilClosed(fd, 3, &closed);
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_NE(got.find("\r\n\r\n3"), std::string::npos) << got;
  EXPECT_NE(got.find("pong"), std::string::npos) << got;
  // Headers past the limit: 431, closed.
  fd = embody_test::ConnectLoopback(gated.port);
  std::string big = "GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40000, 'a');
  (void)::send(fd, big.data(), big.size(), MSG_NOSIGNAL);
  got = ReadUntilClosed(fd, 3, &closed);
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 431", 0), 0u) << got;
}

}  // namespace
}  // namespace controlplane::http
