// The server under faults, end to end (a real embody-server, agents and PostgreSQL):
//   - killed with SIGKILL during a burst of submissions and restarted: every submission that got
//     a 201 is there, none twice (clients retry with their Idempotency-Key after connection
//     errors), the running job carries on, the agents reconnect;
//   - many idle and slow-loris connections, more than the server's worker threads: heartbeats
//     keep the nodes UP and API calls answer within a bound;
//   - a 100 MiB chunked POST, and one announced with Content-Length, without a token: refused,
//     the server's resident memory flat.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/e2e/local_stack.h"
#include "tests/support/slow_clients.h"

namespace embody_test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int Port(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

// Resident memory of `pid`, in bytes (VmRSS), or -1.
int64_t RssBytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

json CommandJob(const std::string& name, int nodes, const std::string& shell, int priority) {
  return {{"name", name},
          {"kind", "command"},
          {"priority", priority},
          {"resources", {{"nodes", nodes}, {"ranks_per_node", 1}}},
          {"command", {"sh", "-c", shell}}};
}

// Every job the admin sees, through the paginated list.
std::vector<json> AllJobs(LocalStack& stack) {
  std::vector<json> out;
  std::string cursor;
  for (int page = 0; page < 100; ++page) {
    HttpResult r = stack.Get("/v1/jobs?limit=500" + (cursor.empty() ? "" : "&cursor=" + cursor));
    EXPECT_EQ(r.status, 200) << r.text;
    if (r.status != 200) break;
    for (const auto& j : r.body["jobs"]) out.push_back(j);
    if (!r.body["next_cursor"].is_string()) break;
    cursor = r.body["next_cursor"].get<std::string>();
  }
  return out;
}

TEST(ServerFaultsTest, SubmissionsSurviveAServerKilledMidBurst) {
  LocalStack stack(2, 1);
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();
  // A job that runs through the kill and the restart and must not notice them: it ends once the
  // test, after the restart, writes `release` (at most a minute: then it fails).
  const std::string release = stack.dir() + "/release";
  HttpResult run = stack.Post(
      "/v1/jobs", CommandJob("carries-on", 1,
                             "for i in $(seq 600); do [ -e " + release +
                                 " ] && exit 0; sleep 0.1; done; exit 1",
                             50)
                      .dump());
  ASSERT_EQ(run.status, 201) << run.text;
  const int64_t running_id = run.body["id"];
  json job = stack.WaitForState(running_id, {"RUNNING"}, 60);
  ASSERT_EQ(job.value("state", ""), "RUNNING") << job.dump(2);

  // The burst: clients each submitting jobs with keys of their own, retrying a key after a
  // connection error or a 5xx until it is answered 201 (made) or 200 (made before).
  constexpr int kClients = 4, kPerClient = 40;
  std::mutex mu;
  std::map<std::string, std::set<int64_t>> ids_by_key;  // every id a key was answered with
  std::map<std::string, int> created_by_key;            // 201s per key
  std::atomic<int> created{0}, retries{0};
  const int port = Port(stack.url());
  auto client = [&](int c) {
    for (int i = 0; i < kPerClient; ++i) {
      const std::string key = "burst-" + std::to_string(c) + "-" + std::to_string(i);
      // Needs both nodes, so it waits (PENDING) while the job above holds one.
      const std::string body = CommandJob(key, 2, "true", 0).dump();
      auto deadline = Clock::now() + std::chrono::seconds(90);
      while (Clock::now() < deadline) {
        httplib::Client http("127.0.0.1", port);
        http.set_connection_timeout(1, 0);
        http.set_read_timeout(10, 0);
        http.set_bearer_token_auth(stack.admin_token());
        auto res = http.Post("/v1/jobs", {{"Idempotency-Key", key}}, body, "application/json");
        if (res && (res->status == 201 || res->status == 200)) {
          json b = json::parse(res->body, nullptr, false);
          std::lock_guard<std::mutex> lock(mu);
          ids_by_key[key].insert(b.value("id", int64_t{-1}));
          if (res->status == 201) {
            ++created_by_key[key];
            ++created;
          }
          break;
        }
        ASSERT_TRUE(!res || res->status >= 500) << key << ": " << res->status << " " << res->body;
        ++retries;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) clients.emplace_back(client, c);
  auto until = Clock::now() + std::chrono::seconds(60);
  while (created < 30 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int created_before_kill = created;
  stack.KillServer();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto restart = Clock::now();
  ASSERT_TRUE(stack.RestartServer()) << "stack in " << stack.dir();
  const double restart_s = Since(restart);
  for (auto& t : clients) t.join();
  std::printf("burst: %d created before the kill, %d in all, %d retries; restart took %.2f s\n",
              created_before_kill, created.load(), retries.load(), restart_s);
  EXPECT_GE(created_before_kill, 30);
  EXPECT_LT(created_before_kill, kClients * kPerClient) << "the kill came after the burst";
  EXPECT_GT(retries.load(), 0) << "no client saw the kill";

  // Every key answered, each with one id, made once; every id there, under its own name.
  ASSERT_EQ(ids_by_key.size(), static_cast<size_t>(kClients * kPerClient));
  for (const auto& [key, ids] : ids_by_key) {
    ASSERT_EQ(ids.size(), 1u) << key << " answered with more than one job";
    EXPECT_LE(created_by_key[key], 1) << key << " created twice";
    HttpResult j = stack.Get("/v1/jobs/" + std::to_string(*ids.begin()));
    ASSERT_EQ(j.status, 200) << key << " got a 201 but its job is gone: " << j.text;
    EXPECT_EQ(j.body.value("name", ""), key);
  }
  std::map<std::string, int> stored;
  for (const json& j : AllJobs(stack)) {
    const std::string name = j.value("name", "");
    if (name.rfind("burst-", 0) == 0) ++stored[name];
  }
  EXPECT_EQ(stored.size(), ids_by_key.size());
  for (const auto& [name, n] : stored) EXPECT_EQ(n, 1) << name << " stored " << n << " times";

  // The agents come back to the new server, and the job that ran through it all finishes as
  // its first attempt.
  auto up_deadline = Clock::now() + std::chrono::seconds(30);
  int up = 0;
  while (Clock::now() < up_deadline && up < 2) {
    up = 0;
    HttpResult nodes = stack.Get("/v1/nodes");
    for (const auto& n : nodes.body["nodes"]) up += n.value("state", "") == "UP";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(up, 2) << stack.Get("/v1/nodes").text;
  job = stack.Get("/v1/jobs/" + std::to_string(running_id)).body;
  EXPECT_EQ(job.value("state", ""), "RUNNING") << "it did not run through the restart: "
                                               << job.dump(2);
  std::ofstream(release) << "go\n";
  job = stack.WaitForState(running_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, 60);
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job.value("attempt", -1), 0) << job.dump(2);
}

TEST(ServerFaultsTest, IdleAndSlowClientsDoNotStarveHeartbeatsOrTheApi) {
  LocalStack stack(2, 1);
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();
  // 300 connections against the server's 32 worker threads, for 8 s: nearly 30 heartbeat
  // intervals (300 ms), where 3 missed would mark a node DOWN.
  embody_test::SlowClients hogs(Port(stack.url()), 150, 150, "/v1/jobs", std::chrono::milliseconds(200));
  const auto start = Clock::now();
  double slowest = 0;
  int calls = 0, failed = 0;
  std::set<std::string> down;
  std::map<std::string, std::set<std::string>> heartbeats;  // node -> last_heartbeat values seen
  while (Since(start) < 8) {
    const auto t = Clock::now();
    HttpResult jobs = stack.Get("/v1/jobs?limit=10");
    HttpResult nodes = stack.Get("/v1/nodes");
    slowest = std::max(slowest, Since(t));
    calls += 2;
    failed += (jobs.status != 200) + (nodes.status != 200);
    for (const auto& n : nodes.body["nodes"]) {
      if (n.value("state", "") != "UP") down.insert(n.value("name", ""));
      heartbeats[n.value("name", "")].insert(n.value("last_heartbeat", ""));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("%d API calls with 300 idle/slow connections open: slowest pair %.3f s\n", calls,
              slowest);
  EXPECT_EQ(failed, 0);
  EXPECT_LT(slowest, 1.0);
  EXPECT_TRUE(down.empty()) << "a node went DOWN: " << *down.begin();
  ASSERT_EQ(heartbeats.size(), 2u);
  for (const auto& [node, seen] : heartbeats) {
    EXPECT_GE(seen.size(), 10u) << node << " heartbeats did not keep arriving";
  }
}

// Streams `total` bytes of body after `head` while reading the answer; returns the answer and
// how many body bytes the server took before it closed.
std::string SendLargeBody(int port, const std::string& head, bool chunked, size_t total,
                          size_t* sent_body) {
  int fd = embody_test::ConnectLoopback(port);
  EXPECT_GE(fd, 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string answer;
  std::thread reader([&] {
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      answer.append(buf, static_cast<size_t>(n));
    }
  });
  (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  const size_t kChunk = 1 << 20;
  const std::string data(kChunk, 'x');
  const std::string frame = chunked ? "100000\r\n" + data + "\r\n" : data;
  *sent_body = 0;
  for (size_t done = 0; done < total; done += kChunk) {
    ssize_t n = ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    *sent_body += static_cast<size_t>(n);
    if (static_cast<size_t>(n) < frame.size()) break;
  }
  if (chunked && *sent_body >= total) (void)::send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  reader.join();
  ::close(fd);
  return answer;
}

TEST(ServerFaultsTest, A100MiBBodyWithoutATokenIsRefusedWithMemoryFlat) {
  LocalStack stack(1, 1);
  ASSERT_TRUE(stack.Start()) << "stack in " << stack.dir();
  const int pid = stack.server_pid();
  for (int i = 0; i < 20; ++i) stack.Get("/v1/jobs");  // warm: threads and connections exist
  const int64_t before = RssBytes(pid);
  ASSERT_GT(before, 0);
  const size_t k100MiB = size_t{100} << 20;
  const int port = Port(stack.url());
  size_t sent = 0;
  std::string answer =
      SendLargeBody(port, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                    true, k100MiB, &sent);
  EXPECT_EQ(answer.rfind("HTTP/1.1 411", 0), 0u) << answer.substr(0, 200);
  const int64_t after_chunked = RssBytes(pid);
  std::printf("chunked: %zu body bytes taken before the refusal; RSS %.1f -> %.1f MiB\n", sent,
              before / 1048576.0, after_chunked / 1048576.0);
  answer = SendLargeBody(port,
                         "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                             std::to_string(k100MiB) + "\r\n\r\n",
                         false, k100MiB, &sent);
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer.substr(0, 200);
  const int64_t after = RssBytes(pid);
  std::printf("Content-Length: %zu body bytes taken before the refusal; RSS -> %.1f MiB\n", sent,
              after / 1048576.0);
  // Flat: a few MiB of noise at most, nowhere near the 100 MiB offered twice.
  EXPECT_LT(after_chunked - before, 8 << 20);
  EXPECT_LT(after - before, 8 << 20);
  EXPECT_EQ(stack.Get("/healthz").status, 200);
}

}  // namespace
}  // namespace embody_test
