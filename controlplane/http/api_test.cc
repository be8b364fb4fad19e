// The REST API end to end, on both stores (server_test_fixture.h): the server runs in-process on
// port 0; requests go over loopback HTTP with cpp-httplib's client, agents are played by the test.
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "controlplane/testing/server_test_fixture.h"
#include "tests/support/slow_clients.h"

namespace controlplane {
namespace {

using nlohmann::json;

class ApiTest : public ServerTest {
 protected:
  static void SetUpTestSuite() { StartServer("api"); }

  static json Spec(const std::string& name, int nodes = 1) {
    return {{"name", name},
            {"kind", "command"},
            {"command", {"true"}},
            {"resources", {{"nodes", nodes}, {"ranks_per_node", 1}}}};
  }

  static int64_t Submit(const json& spec) {
    Reply r = Call("POST", "/v1/jobs", Admin(), spec.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    return r.body.value("id", int64_t{0});
  }

  static json GetJob(int64_t id) {
    return Call("GET", "/v1/jobs/" + std::to_string(id), Admin()).body;
  }

  static int64_t Register(const std::string& name, int slots) { return RegisterNode(name, slots); }

  static json Heartbeat(int64_t node, const json& body = json::object()) {
    Reply r = Call("POST", "/v1/agents/" + std::to_string(node) + "/heartbeat", NodeToken(node),
                   body.dump());
    EXPECT_EQ(r.status, 200) << r.text;
    return r.body;
  }

  // Heartbeats until the reply carries a command of `type` for `job`; returns it.
  static json WaitForCommand(int64_t node, int64_t job, const std::string& type) {
    for (int i = 0; i < 100; ++i) {
      json reply = Heartbeat(node);
      for (const auto& c : reply["commands"]) {
        if (c["job_id"] == job && c["type"] == type) return c;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "no " << type << " command for job " << job;
    return json();
  }

  static size_t JobCount() {
    return Call("GET", "/v1/jobs?limit=500", Admin()).body["jobs"].size();
  }

};

// A job as its submission wrote it: the scheduler may have written its `reason` (why it waits)
// and so its `updated_at`, and its forecast hook the job's first `forecast`, between the submit
// and the read; every other field is the submit's.
json AsSubmitted(json job) {
  job.erase("reason");
  job.erase("updated_at");
  job.erase("forecast");
  return job;
}

// The 201 answer is built from the row written rather than read back: it must say exactly what
// a read of the stored job says, floats and nested objects of the spec (as jsonb keeps them),
// times and every optional field included.
TEST_F(ApiTest, TheSubmitAnswerIsWhatAReadOfTheJobReturns) {
  json spec = {{"name", "answer-as-read"},
               {"kind", "train"},
               {"priority", 7},
               {"max_restarts", 2},
               {"resources", {{"nodes", 1}, {"ranks_per_node", 1}}},
               {"engine", {{"optim", {{"lr", 3e-4}, {"weight_decay", 0.1}, {"steps", 30}}}}}};
  Reply created = Call("POST", "/v1/jobs", Admin(), spec.dump());
  ASSERT_EQ(created.status, 201) << created.text;
  json read = GetJob(created.body.value("id", int64_t{0}));
  EXPECT_EQ(AsSubmitted(created.body), AsSubmitted(read));
  EXPECT_EQ(created.body["updated_at"], created.body["created_at"]);
  EXPECT_EQ(created.body["reason"], "");
  // And with an idempotency key, whose digest the row keeps.
  Reply keyed = Call("POST", "/v1/jobs", Admin(), Spec("answer-keyed").dump(),
                     {{"Idempotency-Key", "answer-as-read-1"}});
  ASSERT_EQ(keyed.status, 201) << keyed.text;
  EXPECT_EQ(AsSubmitted(keyed.body), AsSubmitted(GetJob(keyed.body.value("id", int64_t{0}))));
}

// GET /v1/jobs?state=S pages through next_cursor: every job in that state once, newest first;
// each row of a page is what a read of that job says (a page leaves out the single job's
// launch_phases and forecast).
TEST_F(ApiTest, StateFilteredListPagesThroughEveryJobInTheStateOnce) {
  auto cancel = [](int64_t id) {
    return Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", Admin()).status;
  };
  std::vector<int64_t> cancelled, pending;
  for (int i = 0; i < 8; ++i) {
    const int64_t id = Submit(Spec("paged-" + std::to_string(i)));
    if (i % 3 == 0) {
      pending.push_back(id);  // left waiting while the pages are read
      continue;
    }
    ASSERT_EQ(cancel(id), 200);
    cancelled.insert(cancelled.begin(), id);  // newest first
  }
  std::vector<int64_t> seen;
  std::string cursor;
  for (int pages = 0; pages < 10; ++pages) {
    Reply r = Call("GET", "/v1/jobs?state=CANCELLED&q=paged-&limit=2" +
                              (cursor.empty() ? "" : "&cursor=" + cursor),
                   Admin());
    ASSERT_EQ(r.status, 200) << r.text;
    for (const json& j : r.body["jobs"]) {
      EXPECT_EQ(j["state"], "CANCELLED");
      json read = GetJob(j["id"].get<int64_t>());
      read.erase("launch_phases");
      read.erase("forecast");
      EXPECT_EQ(j, read);
      seen.push_back(j["id"].get<int64_t>());
    }
    if (r.body["next_cursor"].is_null()) break;
    cursor = r.body["next_cursor"].get<std::string>();
  }
  EXPECT_EQ(seen, cancelled);
  for (const int64_t id : pending) EXPECT_EQ(cancel(id), 200);  // nothing left for later tests
}

TEST_F(ApiTest, BootstrapWroteTokensOnceWithMode0600) {
  ASSERT_TRUE(server_->bootstrap().created);
  struct stat st {};
  ASSERT_EQ(stat((*dir_ + "/bootstrap.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A second server on the same database creates nothing.
  ServerOptions o;
  o.data_dir = *dir_ + "/data2";
  auto again = StartAnother(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE((*again)->bootstrap().created);
}

TEST_F(ApiTest, HealthReadinessAndAuth) {
  EXPECT_EQ(Call("GET", "/healthz", "").status, 200);
  EXPECT_EQ(Call("GET", "/readyz", "").status, 200);
  Reply r = Call("GET", "/v1/jobs", "");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body["error"]["code"], "unauthenticated");
  EXPECT_FALSE(r.request_id.empty());
  EXPECT_EQ(Call("GET", "/v1/jobs", "not-a-token").status, 401);
  EXPECT_EQ(Call("POST", "/v1/jobs", Agent(), Spec("x").dump()).status, 403);
  EXPECT_EQ(Call("POST", "/v1/agents/register", Admin(), "{").status, 400);
  Reply echoed = Call("GET", "/healthz", "", "", {{"X-Request-Id", "abc-123"}});
  EXPECT_EQ(echoed.request_id, "abc-123");
  // A route the document cannot give: the router's 404 of its own.
  EXPECT_EQ(CallUndocumented("GET", "/v1/nope", Admin()).status, 404);
  EXPECT_EQ(Call("GET", "/v1/jobs/999999", Admin()).status, 404);
}

// Sends `request` on a fresh connection and reads until the server closes it (or `wait_s` pass).
static std::string RawExchange(int port, const std::string& request, bool* closed,
                               int wait_s = 5) {
  *closed = false;
  int fd = embody_test::ConnectLoopback(port);
  if (fd < 0) return "";
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string got = embody_test::ReadUntilClosed(fd, wait_s, closed);
  ::close(fd);
  return got;
}

static int CountResponses(const std::string& text) {
  int n = 0;
  for (size_t at = text.find("HTTP/1.1 "); at != std::string::npos; at = text.find("HTTP/1.1 ", at + 1)) ++n;
  return n;
}

TEST_F(ApiTest, BodiesAreRefusedUnreadWhenChunkedOrLargeWithoutAToken) {
  const size_t before = JobCount();
  bool closed = false;
  // Chunked: refused on its headers, whatever follows (httplib would read it without a bound).
  std::string chunked = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + Admin() +
                        "\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n" +
                        std::string(4096, 'a');
  // The answer asks the client to close; one that keeps sending only feeds the next request's
  // bounded line reader, so this waits a second at most.
  std::string got = RawExchange(server_->port(), chunked, &closed, 1);
  EXPECT_EQ(got.rfind("HTTP/1.1 411", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Length"), std::string::npos);
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  // A large body with no token is refused before it is read, and the connection closes, so the
  // bytes sent as its body are never taken for a request of their own.
  const std::string inner = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string large = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                      std::to_string(1 << 20) + "\r\n\r\n" + inner;
  got = RawExchange(server_->port(), large, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
  EXPECT_EQ(CountResponses(got), 1) << got;
  EXPECT_TRUE(closed);
  // A small one still reaches the router (which audits the refusal), with the same answer.
  EXPECT_EQ(Call("POST", "/v1/jobs", "", Spec("anon").dump()).status, 401);
  // With a token, the same request is read and answered as usual.
  EXPECT_EQ(Call("POST", "/v1/jobs", Admin(), Spec("ok").dump()).status, 201);
  EXPECT_EQ(JobCount(), before + 1);
}

TEST_F(ApiTest, RejectedSubmissionsStoreNothing) {
  const size_t before = JobCount();
  json bad = Spec("bad");
  bad["resources"]["nodes"] = 0;
  Reply r = Call("POST", "/v1/jobs", Admin(), bad.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["code"], "invalid_argument");
  EXPECT_EQ(r.body["error"]["field"], "resources.nodes");
  EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());

  Reply malformed = Call("POST", "/v1/jobs", Admin(), "{\"name\": ");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(malformed.body["error"]["code"], "invalid_argument");

  json huge = Spec("huge");
  huge["command"] = {std::string(300 * 1024, 'x')};
  Reply oversize = Call("POST", "/v1/jobs", Admin(), huge.dump());
  EXPECT_EQ(oversize.status, 400) << oversize.text;
  EXPECT_EQ(oversize.body["error"]["code"], "invalid_argument");

  json unknown = Spec("u");
  unknown["colour"] = "blue";
  Reply u = Call("POST", "/v1/jobs", Admin(), unknown.dump());
  EXPECT_EQ(u.status, 400);
  EXPECT_EQ(u.body["error"]["field"], "colour");
  EXPECT_EQ(JobCount(), before);
}

TEST_F(ApiTest, IdempotencyKeyReturnsTheSameJob) {
  httplib::Headers key = {{"Idempotency-Key", "retry-1"}};
  Reply first = Call("POST", "/v1/jobs", Admin(), PendingSpec("idem").dump(), key);
  Reply again = Call("POST", "/v1/jobs", Admin(), PendingSpec("idem").dump(), key);
  EXPECT_EQ(first.status, 201);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(first.body["id"], again.body["id"]);
  // The same key with another body is a client bug, not a retry: 409, nothing new stored.
  const size_t before = JobCount();
  Reply other = Call("POST", "/v1/jobs", Admin(), PendingSpec("idem-2").dump(), key);
  EXPECT_EQ(other.status, 409) << other.text;
  EXPECT_EQ(other.body["error"]["field"], "Idempotency-Key");
  EXPECT_EQ(JobCount(), before);
  Reply cancel = Call("POST", "/v1/jobs/" + first.body["id"].dump() + "/cancel", Admin());
  EXPECT_EQ(cancel.body["state"], "CANCELLED");  // it was PENDING
}

TEST_F(ApiTest, JobThatCanNeverFitIsRefusedAtSubmit) {
  const size_t before = JobCount();
  Reply r = Call("POST", "/v1/jobs", Admin(), Spec("too-many-nodes", 64).dump());
  EXPECT_EQ(r.status, 422) << r.text;
  EXPECT_EQ(r.body["error"]["code"], "unprocessable");
  EXPECT_EQ(r.body["error"]["message"],
            "never fits: needs 64 nodes with 1 cpu slots each; the cluster has 1 such nodes of 1")
      << r.text;
  json wide = PendingSpec("too-wide");
  wide["resources"]["ranks_per_node"] = 65;
  EXPECT_EQ(Call("POST", "/v1/jobs", Admin(), wide.dump()).status, 422);
  EXPECT_EQ(JobCount(), before);
}

TEST_F(ApiTest, JobThatFitsNoFreeNodeStaysPendingWithReason) {
  int64_t id = Submit(PendingSpec("too-big"));
  json job;
  for (int i = 0; i < 100; ++i) {
    job = GetJob(id);
    if (!job["reason"].get<std::string>().empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(job["state"], "PENDING");
  EXPECT_NE(job["reason"].get<std::string>().find("waiting for 1 nodes with 64 free cpu slots"),
            std::string::npos)
      << job.dump();
  EXPECT_TRUE(job["allocation"].empty());
  EXPECT_TRUE(job["exit_code"].is_null());
  EXPECT_TRUE(job["last_step"].is_null());
  EXPECT_TRUE(job["latest_checkpoint"].is_null());
  Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", Admin());
}

// A line longer than one read of the log file comes back whole, prefixed once. The logging
// node is the only free one when this test runs (tests run in the order written).
TEST_F(ApiTest, LongLinesStayWholeInMergedLogs) {
  int64_t node = Register("node-logs", 1);
  int64_t id = Submit(Spec("long"));
  WaitForCommand(node, id, "launch");
  const std::string long_line(1500 * 1024, 'x');
  Heartbeat(node, {{"logs", {{{"job_id", id}, {"rank", 0}, {"offset", 0},
                              {"data", long_line + "\nend\n"}}}},
                   {"finished", {{{"job_id", id}, {"exit_code", 0}}}}});
  std::string text = Call("GET", "/v1/jobs/" + std::to_string(id) + "/logs", Admin()).text;
  EXPECT_EQ(text.size(), long_line.size() + 23);
  EXPECT_TRUE(text == "[rank 0] " + long_line + "\n[rank 0] end\n")
      << text.substr(0, 40) << "..." << text.substr(text.size() - 40);
  EXPECT_EQ(GetJob(id)["state"], "SUCCEEDED");
  // Out of the way of the tests after this one.
  EXPECT_EQ(Call("POST", "/v1/nodes/" + std::to_string(node) + "/drain", Admin()).status, 200);
}

TEST_F(ApiTest, LaunchRunFinishWithEventsAndLogs) {
  int64_t node = Register("node-run", 2);
  int64_t id = Submit(Spec("run"));
  json launch = WaitForCommand(node, id, "launch");
  EXPECT_EQ(launch["hosts"][0]["name"], "node-run");
  EXPECT_EQ(launch["spec"]["name"], "run");
  EXPECT_EQ(GetJob(id)["state"], "SCHEDULED");

  // Follow the logs while the job runs; the stream ends by itself once the job ended.
  std::string followed;
  std::thread follower([&] {
    followed = Call("GET", "/v1/jobs/" + std::to_string(id) + "/logs?follow=1", Admin()).text;
  });
  Heartbeat(node, {{"running", {id}},
                   {"events", {{{"job_id", id}, {"type", "step"},
                                {"data", {{"step", 10}, {"steps", 20}, {"loss", 0.25}}}},
                               {{"job_id", id}, {"type", "checkpoint"},
                                {"data", {{"step", 10}, {"path", "/ck/step-10"}, {"bytes", 7}}}}}},
                   {"logs", {{{"job_id", id}, {"rank", 0}, {"offset", 0}, {"data", "hello\n"}}}}});
  json running = GetJob(id);
  EXPECT_EQ(running["state"], "RUNNING");
  EXPECT_FALSE(running["started_at"].is_null());
  EXPECT_EQ(running["last_step"]["loss"], 0.25);
  EXPECT_EQ(running["latest_checkpoint"]["path"], "/ck/step-10");
  EXPECT_EQ(running["allocation"][0]["node"], "node-run");

  Heartbeat(node, {{"logs", {{{"job_id", id}, {"rank", 0}, {"offset", 6}, {"data", "bye\n"}},
                             {{"job_id", id}, {"rank", 1}, {"offset", 0}, {"data", "r1\n"}}}},
                   {"finished", {{{"job_id", id}, {"exit_code", 0}}}}});
  follower.join();
  json done = GetJob(id);
  EXPECT_EQ(done["state"], "SUCCEEDED");
  EXPECT_EQ(done["exit_code"], 0);
  // The finished job still says where it ran, and the node's slots are free again.
  EXPECT_EQ(done["allocation"].size(), 1u);
  for (const auto& n : Call("GET", "/v1/nodes", Admin()).body["nodes"]) {
    EXPECT_EQ(n["slots_used"], 0) << n.dump();
  }
  EXPECT_EQ(followed, "[rank 0] hello\n[rank 0] bye\n[rank 1] r1\n");
  EXPECT_EQ(Call("GET", "/v1/jobs/" + std::to_string(id) + "/logs?rank=0", Admin()).text,
            "hello\nbye\n");

  json events = Call("GET", "/v1/jobs/" + std::to_string(id) + "/events?type=state", Admin()).body;
  std::vector<std::string> states;
  for (const auto& e : events["events"]) states.push_back(e["data"]["to"]);
  EXPECT_EQ(states, (std::vector<std::string>{"PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED"}));
  json steps = Call("GET", "/v1/jobs/" + std::to_string(id) + "/events?type=step", Admin()).body;
  ASSERT_EQ(steps["events"].size(), 1u);
  EXPECT_EQ(steps["events"][0]["data"]["step"], 10);

  // A failing job keeps its exit code and a reason.
  int64_t bad = Submit(Spec("fails"));
  WaitForCommand(node, bad, "launch");
  Heartbeat(node, {{"finished", {{{"job_id", bad}, {"exit_code", 3}}}}});
  json failed = GetJob(bad);
  EXPECT_EQ(failed["state"], "FAILED");
  EXPECT_EQ(failed["exit_code"], 3);
  EXPECT_EQ(failed["reason"], "exited with code 3");

  json nodes = Call("GET", "/v1/nodes", Admin()).body;
  bool found = false;
  for (const auto& n : nodes["nodes"]) {
    if (n["name"] == "node-run") {
      found = true;
      EXPECT_EQ(n["state"], "UP");
      EXPECT_EQ(n["slots_used"], 0);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(ApiTest, CancelRunningJobKillsItUntilReportedFinished) {
  int64_t node = Register("node-cancel", 1);
  int64_t id = Submit(Spec("cancel-me"));
  WaitForCommand(node, id, "launch");
  Heartbeat(node, {{"running", {id}}});
  Reply c = Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", Admin());
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(c.body["state"], "CANCELLING");
  WaitForCommand(node, id, "kill");
  WaitForCommand(node, id, "kill");  // repeated until the agent reports the job ended
  Heartbeat(node, {{"finished", {{{"job_id", id}, {"exit_code", 143}, {"reason", "killed"}}}}});
  EXPECT_EQ(GetJob(id)["state"], "CANCELLED");
  EXPECT_EQ(Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", Admin()).status, 409);
}

TEST_F(ApiTest, MetricsCountRequestsByRoutePattern) {
  Call("GET", "/v1/jobs/424242", Admin());
  std::string text = Call("GET", "/metrics", Admin()).text;
  EXPECT_NE(text.find("embody_http_requests_total{method=\"GET\",route=\"/v1/jobs/{id}\",status=\"404\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("embody_http_request_duration_seconds_bucket{method=\"GET\","
                      "route=\"/v1/jobs/{id}\""),
            std::string::npos);
  EXPECT_EQ(text.find("424242"), std::string::npos);  // raw paths never become labels
  // embody_jobs{state,tenant} and the other series: observability_pg_test.cc.
  EXPECT_NE(text.find("embody_nodes{state=\"UP\"}"), std::string::npos);
  EXPECT_NE(text.find("embody_scheduler_queue_depth"), std::string::npos);
  EXPECT_NE(text.find("embody_scheduler_cycle_seconds_count"), std::string::npos);
}

}  // namespace
}  // namespace controlplane
