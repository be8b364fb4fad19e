// The HTTP edge under hostile and careless clients, side by side in one run: the edge every
// listener now uses (common/http/gated_server.h with common/http/edge_policy.h) against plain
// cpp-httplib with as many threads (the edge the agent's job-local API had, and the one every
// httplib server has). Each edge serves the same handlers in a child process of its own, so its
// memory is measured alone (VmRSS, sampled every 20 ms):
//   GET  /v1/jobs                      a 2 KB JSON list
//   POST /v1/agents/1/heartbeat        parses its JSON body, answers a small JSON
//   POST /v1/jobs                      parses its JSON body, answers 201
//   GET  /v1/jobs/1/logs?follow=1      a quiet log stream: one line, then nothing until the job
//                                      ends (--stream-seconds); it ends early when its client goes
//                                      (the gated edge can tell; plain httplib cannot)
// Every route needs "Authorization: Bearer …" (401 otherwise), as the server's do.
//
// Scenarios, in order, on each edge:
//   slow:      --connections anonymous connections held open, half idle, half sending a 60,000-byte
//              body a byte a second, from four loopback addresses; meanwhile --requests heartbeats
//              and --requests GET /v1/jobs, each p99 and the server's memory growth;
//   no-length: POST /v1/jobs without Content-Length, then --no-length-mib MiB: time to the answer,
//              its status, memory growth;
//   bomb:      a gzip body of --bomb-gib GiB of zeros (--baseline-bomb-gib for plain httplib, which
//              inflates it whole) under "Authorization: Bearer x": time, status, memory growth;
//   streams:   --streams log follows opened, submissions' p99 meanwhile, then all dropped: the time
//              until the server holds none;
//   submit:    --clients kept-alive clients POST /v1/jobs for --load-seconds: submissions/s, p99.
// Goals (issue "Edges an operator can expose"): slow p99 < 100 ms and growth < 64 MiB; no-length
// and bomb answered 4xx within 1 s, growth < 16 MiB; streams' submissions p99 < 100 ms and all
// released within 1 s; submit at least the baseline's rate. The last line is JSON.
//
//   edge_bench [--connections 1000] [--requests 200] [--no-length-mib 300] [--bomb-gib 4]
//              [--baseline-bomb-gib 1] [--streams 200] [--stream-seconds 30] [--clients 32]
//              [--load-seconds 3] [--edge both|gated|httplib]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/load_average.h"
#include "common/http/gated_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Options {
  int connections = 1000;
  int requests = 200;
  int no_length_mib = 300;
  double bomb_gib = 4;
  double baseline_bomb_gib = 1;
  int streams = 200;
  int stream_seconds = 30;
  int clients = 32;
  double load_seconds = 3;
  std::string edge = "both";
};

// Shared with the child: the streams its handlers are serving now.
std::atomic<int>* g_streams = nullptr;

// ---- the server (child process) ----------------------------------------------------------------

bool Authorized(const httplib::Request& req, httplib::Response& res) {
  if (req.get_header_value("Authorization").rfind("Bearer ", 0) == 0) return true;
  res.status = 401;
  res.set_content(R"({"error":{"code":"unauthenticated","message":"missing bearer token"}})",
                  "application/json");
  return false;
}

void AddHandlers(httplib::Server& s, bool gated, int stream_seconds) {
  static const std::string list = [] {
    json jobs = json::array();
    for (int i = 0; i < 20; ++i) jobs.push_back({{"id", i}, {"name", "job"}, {"state", "RUNNING"}});
    return json{{"jobs", jobs}}.dump();
  }();
  s.Get("/v1/jobs", [](const httplib::Request& req, httplib::Response& res) {
    if (Authorized(req, res)) res.set_content(list, "application/json");
  });
  auto parse = [](const httplib::Request& req, httplib::Response& res, int status,
                  const std::string& answer) {
    if (!Authorized(req, res)) return;
    json body = json::parse(req.body, nullptr, false);
    res.status = body.is_discarded() ? 400 : status;
    res.set_content(answer, "application/json");
  };
  s.Post("/v1/agents/1/heartbeat", [parse](const httplib::Request& req, httplib::Response& res) {
    parse(req, res, 200, R"({"commands":[]})");
  });
  s.Post("/v1/jobs", [parse](const httplib::Request& req, httplib::Response& res) {
    parse(req, res, 201, R"({"id":1})");
  });
  s.Get("/v1/jobs/1/logs",
        [gated, stream_seconds](const httplib::Request& req, httplib::Response& res) {
          if (!Authorized(req, res)) return;
          res.set_chunked_content_provider(
              "text/plain", [gated, stream_seconds](size_t, httplib::DataSink& sink) {
                ++*g_streams;
                bool ok = sink.write("started\n", 8);
                auto start = Clock::now();
                while (ok && Since(start) < stream_seconds) {
                  if (!sink.is_writable()) break;
                  if (gated && common::http::GatedServer::ClientGone()) break;
                  std::this_thread::sleep_for(std::chrono::milliseconds(100));
                }
                --*g_streams;
                if (ok) sink.done();
                return false;
              });
        });
}

// Plain httplib with the backlog raised as the gated server's is, so both take a burst alike.
struct PlainServer : httplib::Server {
  PlainServer() {
    new_task_queue = [] { return new httplib::ThreadPool(32); };
  }
  void SetListenBacklog(int backlog) { ::listen(svr_sock_, backlog); }
};

[[noreturn]] void ServeChild(bool gated, int port_pipe, int stream_seconds) {
  std::unique_ptr<httplib::Server> server;
  if (gated) {
    common::http::GateOptions o;  // as embody-server's (controlplane/http/api_server.cc)
    o.workers = 32;
    o.stream_workers = 256;
    o.is_stream = [](const common::http::RequestHead& head) {
      return common::http::QueryValue(head.target, "follow") == "1";
    };
    server = std::make_unique<common::http::GatedServer>(std::move(o));
  } else {
    server = std::make_unique<PlainServer>();
    server->set_payload_max_length(8 * 1024 * 1024);
  }
  server->set_tcp_nodelay(true);
  server->set_read_timeout(30, 0);
  server->set_write_timeout(30, 0);
  AddHandlers(*server, gated, stream_seconds);
  int port = server->bind_to_any_port("127.0.0.1");
  if (gated) {
    static_cast<common::http::GatedServer*>(server.get())->SetListenBacklog(4096);
  } else {
    static_cast<PlainServer*>(server.get())->SetListenBacklog(4096);
  }
  (void)!::write(port_pipe, &port, sizeof port);
  ::close(port_pipe);
  server->listen_after_bind();
  std::_Exit(0);
}

// ---- measuring ---------------------------------------------------------------------------------

int64_t RssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// The highest RSS of `pid` from construction to Peak().
class RssSampler {
 public:
  explicit RssSampler(pid_t pid) : pid_(pid), base_(RssBytes(pid)), peak_(base_) {
    thread_ = std::thread([this] {
      while (!done_) {
        peak_ = std::max<int64_t>(peak_, RssBytes(pid_));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~RssSampler() { Stop(); }
  void Stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  double GrowthMiB() {
    Stop();
    return static_cast<double>(std::max<int64_t>(0, peak_ - base_)) / (1 << 20);
  }

 private:
  pid_t pid_;
  int64_t base_;
  std::atomic<int64_t> peak_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// A TCP connection to `port` from loopback address 127.0.0.`from`, or -1.
int Connect(int port, int from = 1) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(0x7f000000u | static_cast<uint32_t>(from));
  ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Sequential calls on one kept-alive client; a failed call counts as the 2 s it was allowed.
std::vector<double> TimedCalls(int port, int n, const std::string& method, const std::string& path,
                               const std::string& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(2, 0);
  c.set_write_timeout(2, 0);
  httplib::Headers h = {{"Authorization", "Bearer t"}};
  std::vector<double> out;
  int failed_in_a_row = 0;
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    auto res = method == "GET" ? c.Get(path.c_str(), h)
                               : c.Post(path.c_str(), h, body, "application/json");
    const bool ok = res && res->status < 300;
    out.push_back(ok ? Since(t) : 2.0);
    failed_in_a_row = ok ? 0 : failed_in_a_row + 1;
    // Five timeouts in a row: the rest would time out too; they are counted as such.
    if (failed_in_a_row == 5) {
      out.resize(static_cast<size_t>(n), 2.0);
      break;
    }
  }
  return out;
}

const std::string kHeartbeat = json{{"slots_free", 2}, {"jobs", json::array()}}.dump();
const std::string kJob = json{
    {"name", "edge"},
    {"kind", "command"},
    {"command", {"true"}},
    {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
    {"pad",
     std::string(800, 'x')}}.dump();

struct Row {
  std::string edge;
  json figures;
};

json SlowClients(const Options& o, pid_t pid, int port) {
  RssSampler rss(pid);
  std::vector<int> idle, slow;
  const std::string head =
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 60000\r\n\r\n{";
  int refused = 0;
  for (int i = 0; i < o.connections; ++i) {
    int fd = Connect(port, 2 + i % 4);
    if (fd < 0) {
      ++refused;
      continue;
    }
    if (i % 2 == 0) {
      idle.push_back(fd);
    } else {
      (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      slow.push_back(fd);
    }
  }
  std::atomic<bool> done{false};
  std::thread dribble([&] {
    while (!done) {
      for (int fd : slow) (void)::send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int i = 0; i < 10 && !done; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto heartbeats = TimedCalls(port, o.requests, "POST", "/v1/agents/1/heartbeat", kHeartbeat);
  auto lists = TimedCalls(port, o.requests, "GET", "/v1/jobs", "");
  done = true;
  dribble.join();
  const double growth = rss.GrowthMiB();
  // Still open from our side: the server has not closed them (a closed one reads 0).
  int held = 0;
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) ++held;
  }
  for (int fd : idle) ::close(fd);
  for (int fd : slow) ::close(fd);
  return {{"heartbeat_p99_ms", Percentile(heartbeats, 0.99) * 1e3},
          {"list_p99_ms", Percentile(lists, 0.99) * 1e3},
          {"idle_still_open", held},
          {"connect_refused", refused},
          {"growth_mib", growth}};
}

// Sends `head` and then `body_bytes` of filler (or `body`) while waiting for the answer; returns
// the status (0: none within `limit_s`) and the seconds to it.
std::pair<int, double> SendUntilAnswered(int port, const std::string& head, const std::string& body,
                                         int64_t body_bytes, double limit_s) {
  int fd = Connect(port);
  auto start = Clock::now();
  (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::atomic<bool> answered{false};
  std::thread sender([&] {
    const std::string block(1 << 20, 'x');
    int64_t sent = 0;
    const int64_t total = body.empty() ? body_bytes : static_cast<int64_t>(body.size());
    while (!answered && sent < total && Since(start) < limit_s) {
      const std::string& src = body.empty() ? block : body;
      size_t at = body.empty() ? 0 : static_cast<size_t>(sent);
      size_t n = static_cast<size_t>(
          std::min<int64_t>(total - sent, body.empty() ? block.size() : 1 << 20));
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t w = ::send(fd, src.data() + at, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0 && errno != EAGAIN) break;
      if (w > 0) sent += w;
    }
    ::shutdown(fd, SHUT_WR);
  });
  int status = 0;
  char buf[256];
  while (Since(start) < limit_s) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n >= 12 && std::string(buf, 9) == "HTTP/1.1 ") {
      status = std::atoi(std::string(buf + 9, 3).c_str());
    } else {
      status = n == 0 ? -1 : -errno;  // closed, or reset, without an answer
    }
    break;
  }
  const double seconds = Since(start);
  answered = true;
  sender.join();
  ::close(fd);
  return {status, seconds};
}

json NoLength(const Options& o, pid_t pid, int port) {
  RssSampler rss(pid);
  auto [status, seconds] = SendUntilAnswered(
      port, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n", "",
      static_cast<int64_t>(o.no_length_mib) << 20, 60);
  return {{"status", status},
          {"seconds", seconds},
          {"growth_mib", rss.GrowthMiB()},
          {"mib", o.no_length_mib}};
}

std::string GzipZeros(double gib) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY);
  const std::string zeros(1 << 20, '\0');
  std::string out;
  std::string buf(1 << 16, '\0');
  const int64_t blocks = static_cast<int64_t>(gib * 1024);
  for (int64_t i = 0; i <= blocks; ++i) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    z.avail_in = i < blocks ? static_cast<uInt>(zeros.size()) : 0;
    const int flush = i < blocks ? Z_NO_FLUSH : Z_FINISH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      deflate(&z, flush);
      out.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}

json Bomb(double gib, pid_t pid, int port) {
  const std::string body = GzipZeros(gib);
  RssSampler rss(pid);
  auto [status, seconds] =
      SendUntilAnswered(port,
                        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Encoding: gzip\r\nAuthorization: Bearer x\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n",
                        body, 0, 120);
  return {{"status", status},
          {"seconds", seconds},
          {"growth_mib", rss.GrowthMiB()},
          {"gib", gib},
          {"compressed_mib", static_cast<double>(body.size()) / (1 << 20)}};
}

json Streams(const Options& o, int port) {
  const std::string get =
      "GET /v1/jobs/1/logs?follow=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n";
  std::vector<int> fds;
  for (int i = 0; i < o.streams; ++i) {
    int fd = Connect(port, 2 + i % 4);
    if (fd < 0) continue;
    (void)::send(fd, get.data(), get.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int serving = g_streams->load();
  auto submits = TimedCalls(port, o.requests / 4, "POST", "/v1/jobs", kJob);
  for (int fd : fds) ::close(fd);
  auto dropped = Clock::now();
  while (g_streams->load() > 0 && Since(dropped) < o.stream_seconds + 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {{"opened", fds.size()},
          {"served_at_once", serving},
          {"submit_p99_ms", Percentile(submits, 0.99) * 1e3},
          {"released_s", Since(dropped)}};
}

json Submit(const Options& o, int port) {
  std::atomic<bool> done{false};
  std::vector<std::vector<double>> lat(static_cast<size_t>(o.clients));
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) {
    threads.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);
      c.set_read_timeout(2, 0);
      httplib::Headers h = {{"Authorization", "Bearer t"}};
      while (!done) {
        auto t = Clock::now();
        auto res = c.Post("/v1/jobs", h, kJob, "application/json");
        lat[static_cast<size_t>(i)].push_back(res && res->status == 201 ? Since(t) : 2.0);
      }
    });
  }
  auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.load_seconds));
  done = true;
  for (auto& t : threads) t.join();
  const double seconds = Since(start);
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  return {{"per_s", static_cast<double>(all.size()) / seconds},
          {"p99_ms", Percentile(all, 0.99) * 1e3}};
}

json RunEdge(const Options& o, bool gated) {
  g_streams->store(0);
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ServeChild(gated, fds[1], o.stream_seconds);
  }
  ::close(fds[1]);
  int port = 0;
  (void)!::read(fds[0], &port, sizeof port);
  ::close(fds[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const char* name = gated ? "gated" : "httplib";
  json r;
  std::printf("[%s] slow clients...\n", name);
  std::fflush(stdout);
  r["slow"] = SlowClients(o, pid, port);
  std::printf("[%s] no length...\n", name);
  std::fflush(stdout);
  r["no_length"] = NoLength(o, pid, port);
  std::printf("[%s] gzip bomb...\n", name);
  std::fflush(stdout);
  r["bomb"] = Bomb(gated ? o.bomb_gib : o.baseline_bomb_gib, pid, port);
  std::printf("[%s] streams...\n", name);
  std::fflush(stdout);
  r["streams"] = Streams(o, port);
  std::printf("[%s] submissions...\n", name);
  std::fflush(stdout);
  r["submit"] = Submit(o, port);
  r["rss_mib_end"] = static_cast<double>(RssBytes(pid)) / (1 << 20);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"The HTTP edge under hostile clients: gated edge vs plain httplib"};
  app.add_option("--connections", o.connections);
  app.add_option("--requests", o.requests);
  app.add_option("--no-length-mib", o.no_length_mib);
  app.add_option("--bomb-gib", o.bomb_gib);
  app.add_option("--baseline-bomb-gib", o.baseline_bomb_gib);
  app.add_option("--streams", o.streams);
  app.add_option("--stream-seconds", o.stream_seconds);
  app.add_option("--clients", o.clients);
  app.add_option("--load-seconds", o.load_seconds);
  app.add_option("--edge", o.edge)->check(CLI::IsMember({"both", "gated", "httplib"}));
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  void* shared = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  g_streams = new (shared) std::atomic<int>(0);

  json out{
      {"bench", "edge_bench"}, {"cpu", bench::CpuModel()}, {"load_before", bench::LoadAverage()}};
  if (o.edge != "gated") out["httplib"] = RunEdge(o, false);
  if (o.edge != "httplib") out["gated"] = RunEdge(o, true);

  auto line = [&](const char* what, const char* group, const char* key, const char* unit) {
    std::printf("%-44s", what);
    for (const char* e : {"httplib", "gated"}) {
      if (out.contains(e)) {
        std::printf(" %14.1f %-4s", out[e][group][key].get<double>(), unit);
      } else {
        std::printf(" %19s", "-");
      }
    }
    std::printf("\n");
  };
  std::printf("\nCPU: %s, load before %.2f\n", bench::CpuModel().c_str(),
              out["load_before"].get<double>());
  std::printf("%-44s %19s %19s\n", "", "httplib", "gated");
  line("slow: heartbeat p99", "slow", "heartbeat_p99_ms", "ms");
  line("slow: GET /v1/jobs p99", "slow", "list_p99_ms", "ms");
  line("slow: server memory growth", "slow", "growth_mib", "MiB");
  line("no length: seconds to the answer", "no_length", "seconds", "s");
  line("no length: status", "no_length", "status", "");
  line("no length: server memory growth", "no_length", "growth_mib", "MiB");
  line("gzip bomb: GiB inflated to", "bomb", "gib", "GiB");
  line("gzip bomb: seconds to the answer", "bomb", "seconds", "s");
  line("gzip bomb: status", "bomb", "status", "");
  line("gzip bomb: server memory growth", "bomb", "growth_mib", "MiB");
  line("streams: served at once", "streams", "served_at_once", "");
  line("streams: submissions p99 meanwhile", "streams", "submit_p99_ms", "ms");
  line("streams: all released after the drop", "streams", "released_s", "s");
  line("submit: per second", "submit", "per_s", "/s");
  line("submit: p99", "submit", "p99_ms", "ms");
  if (out.contains("httplib") && out.contains("gated")) {
    const double ratio = out["gated"]["submit"]["per_s"].get<double>() /
                         out["httplib"]["submit"]["per_s"].get<double>();
    out["submit_ratio_gated_to_httplib"] = ratio;
    std::printf("submissions/s, gated / httplib: %.2fx\n", ratio);
  }
  out["load_after"] = bench::LoadAverage();
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
