// GatedServer on loopback (no database): idle and slow-loris clients do not starve the workers
// (and the same clients do starve plain httplib, so the measurement can tell), slow headers and
// idle connections are cut off on time, and requests still work: keep-alive, pipelining, bodies,
// oversize headers.
#include "common/http/gated_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/slow_clients.h"

namespace common::http {
namespace {

using SteadyClock = std::chrono::steady_clock;
using embody_test::ReadUntilClosed;

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
    auto start = SteadyClock::now();
    auto res = c.Get("/ping");
    double s = std::chrono::duration<double>(SteadyClock::now() - start).count();
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
  o.limits = {.max_body = 1 << 20, .anonymous_body = 1024};
  return o;
}

// Sends `request` on a fresh connection and reads the answer until the server closes or
// `wait_s` passes; the connection stays open on our side meanwhile.
std::string Exchange(int port, const std::string& request, double wait_s, bool* closed,
                     double* seconds = nullptr) {
  int fd = embody_test::ConnectLoopback(port);
  auto start = SteadyClock::now();
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string got = ReadUntilClosed(fd, wait_s, closed);
  if (seconds) *seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  ::close(fd);
  return got;
}

TEST(GatedServerTest, IdleAndSlowClientsDoNotStarveTheWorkers) {
  // Plain httplib with as many threads: the same clients take every worker, so a request waits
  // past its 2 s timeout. This is what the gate is for, and shows the measurement can fail.
  {
    struct Plain : httplib::Server {
      Plain() {
        new_task_queue = [] { return new httplib::ThreadPool(2); };
      }
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
  auto start = SteadyClock::now();
  bool closed = false;
  ReadUntilClosed(hogs.loris_fd(0), 6, &closed);
  double loris_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
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
    auto res = c.Post("/size", {{"Authorization", "Bearer x"}}, std::string(100000 + i, 'x'),
                      "text/plain");
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

TEST(GatedServerTest, ARequestWithoutALengthHasNoBody) {
  // RFC 9112 §6.3: no Content-Length and no Transfer-Encoding, no body. httplib alone would read
  // until the client closes, so `curl -X POST …/cancel` without -d would hang.
  Running<GatedServer> gated(SmallGate());
  int fd = embody_test::ConnectLoopback(gated.port);
  const std::string req = "POST /size HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // The head and the body may arrive in separate reads: read until the body's byte is in.
  std::string got;
  char buf[4096];
  for (;;) {
    const size_t head_end = got.find("\r\n\r\n");
    if (head_end != std::string::npos && got.size() > head_end + 4) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  ASSERT_FALSE(got.empty()) << "no answer within 1 s";
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("\r\n\r\n0"), std::string::npos) << got;
}

// The same with the client people type: curl's `-X POST` without `-d` sends no length and waits
// for the answer (deploy/setup.sh installs curl).
TEST(GatedServerTest, CurlPostWithoutABodyIsAnsweredAtOnce) {
  if (::access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "no curl";
  Running<GatedServer> gated(SmallGate());
  const std::string cmd = "/usr/bin/curl -s -m 5 -X POST http://127.0.0.1:" +
                          std::to_string(gated.port) + "/size 2>&1";
  auto start = SteadyClock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  const int rc = ::pclose(p);
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  EXPECT_EQ(rc, 0) << std::string(buf, n);
  EXPECT_EQ(std::string(buf, n), "0");
  EXPECT_LT(seconds, 2.0);
}

TEST(GatedServerTest, BodiesThatCannotBeBoundedAreRefusedUnread) {
  Running<GatedServer> gated(SmallGate());
  struct Case {
    std::string headers;
    const char* status;
  };
  const std::vector<Case> cases = {
      {"Content-Length: 10\r\nContent-Encoding: gzip\r\nAuthorization: Bearer x", "415"},
      {"Transfer-Encoding: chunked\r\nAuthorization: Bearer x", "411"},
      {"Content-Length: 4294967296\r\nAuthorization: Bearer x", "413"},
      {"Content-Length: 2000", "401"},  // over the anonymous bound, no token
      {"Content-Length: 5\r\nContent-Length: 6", "400"},
  };
  for (const Case& c : cases) {
    // Part of a body follows the headers, as a client that does not wait for 100 Continue sends.
    bool closed = false;
    double seconds = 0;
    std::string got = Exchange(
        gated.port,
        "POST /size HTTP/1.1\r\nHost: x\r\n" + c.headers + "\r\n\r\n" + std::string(1000, 'z'), 3,
        &closed, &seconds);
    EXPECT_EQ(got.rfind(std::string("HTTP/1.1 ") + c.status, 0), 0u) << c.headers << ": " << got;
    EXPECT_NE(got.find("\"error\""), std::string::npos) << got;
    EXPECT_TRUE(closed) << c.headers;
    EXPECT_LT(seconds, 2.0) << c.headers;
  }
}

TEST(GatedServerTest, SlowBodiesDoNotHoldAWorkerAndAreCutOff) {
  GateOptions o = SmallGate();
  o.workers = 1;
  o.body_timeout_ms = 1000;
  o.min_body_bytes_per_s = 1 << 20;
  Running<GatedServer> gated(o);
  // Twenty clients send their headers and then a byte of a 1,000-byte body now and then.
  std::vector<int> slow;
  const std::string head =
      "POST /size HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer x\r\nContent-Length: 1000\r\n\r\n";
  for (int i = 0; i < 20; ++i) {
    int fd = embody_test::ConnectLoopback(gated.port);
    (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    (void)::send(fd, "z", 1, MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(SlowestPing(gated.port, 10), 0.5) << "a slow body held the only worker";
  // Past the body's deadline (1 s + its length at 1 MiB/s): 408 and closed.
  bool closed = false;
  std::string got = ReadUntilClosed(slow[0], 3, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  for (int fd : slow) ::close(fd);
  // A body that arrives whole is served.
  got = Exchange(gated.port,
                 "POST /size HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                     head.substr(head.find("Authorization")) + std::string(1000, 'z'),
                 3, &closed);
  EXPECT_NE(got.find("\r\n\r\n1000"), std::string::npos) << got;
}

TEST(GatedServerTest, ConnectionsAreCappedPerClientAddress) {
  GateOptions o = SmallGate();
  o.max_connections_per_address = 3;
  Running<GatedServer> gated(o);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(embody_test::ConnectLoopback(gated.port));
  for (int i = 0; i < 50 && gated.server.OpenConnections() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(gated.server.OpenConnections(), 3u);
  bool closed = false;
  Exchange(gated.port, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n", 2, &closed);
  EXPECT_TRUE(closed) << "a fourth connection from one address was served";
  ::close(held.back());
  held.pop_back();
  for (int i = 0; i < 100 && gated.server.OpenConnections() > 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(SlowestPing(gated.port, 1), 0.5) << "a freed place was not given to a new connection";
  for (int fd : held) ::close(fd);
}

TEST(GatedServerTest, StreamsHaveThreadsOfTheirOwnAndEndWhenTheClientGoes) {
  GateOptions o = SmallGate();
  o.workers = 1;
  o.stream_workers = 2;
  o.is_stream = [](const RequestHead& head) { return TargetPath(head.target) == "/stream"; };
  std::atomic<int> ended{0};
  Running<GatedServer> gated(o);
  gated.server.Get("/stream", [&ended](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/plain", [&ended](size_t, httplib::DataSink& sink) {
      if (!sink.write("tick\n", 5)) return false;
      while (!GatedServer::ClientGone()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ++ended;
      return false;
    });
  });
  const std::string get = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<int> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(embody_test::ConnectLoopback(gated.port));
    (void)::send(streams.back(), get.data(), get.size(), MSG_NOSIGNAL);
  }
  for (int i = 0; i < 100 && gated.server.ActiveStreams() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(gated.server.ActiveStreams(), 2u);
  // Both streams held, the one ordinary worker is still free; a third stream is refused.
  EXPECT_LT(SlowestPing(gated.port, 5), 0.5);
  bool closed = false;
  std::string got = Exchange(gated.port, get, 2, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
  // Dropped streams end, and free their threads, well within a second.
  for (int fd : streams) ::close(fd);
  auto start = SteadyClock::now();
  while (ended.load() < 2 && SteadyClock::now() - start < std::chrono::seconds(2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(ended.load(), 2);
  EXPECT_LT(std::chrono::duration<double>(SteadyClock::now() - start).count(), 1.0);
  for (int i = 0; i < 100 && gated.server.ActiveStreams() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(gated.server.ActiveStreams(), 0u);
}

}  // namespace
}  // namespace common::http
