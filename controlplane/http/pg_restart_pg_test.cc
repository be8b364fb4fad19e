// PostgreSQL restarted, and its sessions killed, under a burst of submissions (label pg): one
// embody-server in-process, several client threads submitting jobs with Idempotency-Keys and
// retrying 503s with the same key. Every answer is 201, 200 (the replay of a submission whose
// first answer was lost to the fault) or 503 with Retry-After, never a 500 and never a wait past
// a bound; every key ends with exactly one job, each with its submission event (nothing half
// written); /readyz says 503 while the database is away and 200 after; the server is never
// restarted. Built twice: as it is, and with the submission batcher on
// (EMBODY_SUBMIT_BATCH_WINDOW_US; controlplane_pg_restart_batched_pg_test), where a fault in a
// batch's transaction reaches all its members at once.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "controlplane/testing/pg_server_fixture.h"

namespace controlplane {
namespace {

#ifndef EMBODY_SUBMIT_BATCH_WINDOW_US
#define EMBODY_SUBMIT_BATCH_WINDOW_US 0
#endif

constexpr int kThreads = 4;
// No request may take longer than this, whatever the database does.
constexpr double kMaxRequestSeconds = 15;

class PgRestartTest : public InProcessServerTest {
 protected:
  static void SetUpTestSuite() {
    StartServer("pgrestart", 1000, "", [](ServerOptions& o) {
      o.submit_batch_window_us = EMBODY_SUBMIT_BATCH_WINDOW_US;
    });
  }
  static void TearDownTestSuite() { InProcessServerTest::TearDownTestSuite(); }

  struct Tally {
    std::mutex mu;
    std::map<int, int> by_status;         // HTTP status -> answers
    std::set<std::string> done;           // keys answered 201 or 200
    std::set<std::string> given_up;       // keys that never got a 201 or 200
    double max_seconds = 0;
    int missing_retry_after = 0;          // 503s without Retry-After
  };

  // Submits jobs until `stop`, each retried on 503 (same key) until it is answered.
  static void Submitter(int thread, std::atomic<bool>& stop, Tally& tally) {
    httplib::Client cli("127.0.0.1", server_->port());
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(static_cast<time_t>(kMaxRequestSeconds) + 5, 0);
    const httplib::Headers auth = {{"Authorization", "Bearer " + Admin()}};
    for (int i = 0; !stop.load(); ++i) {
      const std::string key = "chaos-" + std::to_string(thread) + "-" + std::to_string(i);
      const std::string body = PendingSpec(key).dump();
      bool answered = false;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!answered && std::chrono::steady_clock::now() < give_up) {
        httplib::Headers h = auth;
        h.emplace("Idempotency-Key", key);
        const auto start = std::chrono::steady_clock::now();
        auto res = cli.Post("/v1/jobs", h, body, "application/json");
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const int status = res ? res->status : 0;
        if (res) {
          Reply reply;
          reply.status = res->status;
          reply.text = res->body;
          reply.headers = res->headers;
          ExpectDocumented("POST", "/v1/jobs", reply);
        }
        {
          std::lock_guard<std::mutex> lock(tally.mu);
          tally.by_status[status] += 1;
          tally.max_seconds = std::max(tally.max_seconds, took);
          if (status == 503 && res->get_header_value("Retry-After") != "1") {
            tally.missing_retry_after += 1;
          }
        }
        if (status == 201 || status == 200) {
          answered = true;
        } else if (status == 503) {
          // Retry-After says 1 s; a shorter wait keeps the test short and presses harder.
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        } else {
          break;  // anything else is a failure the test reports
        }
      }
      std::lock_guard<std::mutex> lock(tally.mu);
      (answered ? tally.done : tally.given_up).insert(key);
    }
  }

  static int Readyz() { return Call("GET", "/readyz", "").status; }

  // Polls /readyz until it answers `want`; false after `seconds`.
  static bool WaitReadyz(int want, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (Readyz() == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  static size_t Done(Tally& t) {
    std::lock_guard<std::mutex> lock(t.mu);
    return t.done.size();
  }

  static void WaitForMoreDone(Tally& t, size_t more, double seconds) {
    const size_t target = Done(t) + more;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (Done(t) < target && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  static std::string Sql(const std::string& q) {
    auto r = pg_->Psql(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::string s = r.ok() ? *r : "";
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
};

TEST_F(PgRestartTest, SubmissionsSurviveRestartAndKilledSessions) {
  ASSERT_EQ(Readyz(), 200);
  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &stop, &tally] { Submitter(t, stop, tally); });
  }
  WaitForMoreDone(tally, 20, 30);

  // 1. A fast restart: in-flight statements are cut, the database refuses connections for a
  // while, then comes back on the same port.
  const std::string script = embody::testing::SourceDir() + "/deploy/pg_cluster.sh";
  auto stopped = embody::testing::RunCommand({script, "stop", pg_->dir()});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_TRUE(WaitReadyz(503, 5)) << "/readyz did not say 503 while the database was down";
  const auto body = Call("GET", "/readyz", "");
  EXPECT_NE(body.text.find("database unavailable"), std::string::npos) << body.text;
  EXPECT_EQ(Call("GET", "/healthz", "").status, 200);  // the process itself is alive
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto started = embody::testing::RunCommand({script, "start", pg_->dir()});
  ASSERT_EQ(started.exit_code, 0) << started.output;
  EXPECT_TRUE(WaitReadyz(200, 30)) << "/readyz did not come back after the restart";
  WaitForMoreDone(tally, 20, 30);

  // 2. Every session of the server killed at once, mid-burst.
  EXPECT_GT(std::stoi(Sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                          "WHERE application_name LIKE 'embody-%'")),
            0);
  WaitForMoreDone(tally, 20, 30);
  stop = true;
  for (std::thread& t : threads) t.join();

  std::string statuses;
  for (const auto& [status, n] : tally.by_status) {
    statuses += std::to_string(status) + ":" + std::to_string(n) + " ";
  }
  std::printf("answers by status: %s; keys done %zu; slowest %.2f s\n", statuses.c_str(),
              tally.done.size(), tally.max_seconds);
  for (const auto& [status, n] : tally.by_status) {
    EXPECT_TRUE(status == 201 || status == 200 || status == 503)
        << n << " answers with status " << status << " (" << statuses << ")";
  }
  EXPECT_GT(tally.by_status[503], 0) << "the faults were not seen: " << statuses;
  EXPECT_EQ(tally.missing_retry_after, 0);
  EXPECT_LT(tally.max_seconds, kMaxRequestSeconds);
  EXPECT_TRUE(tally.given_up.empty()) << tally.given_up.size() << " keys never answered";

  // Exactly one job per answered key, and no job of a key that was never answered.
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'chaos-%'"),
            std::to_string(tally.done.size()));
  EXPECT_EQ(Sql("SELECT count(*) FROM (SELECT idempotency_key FROM jobs WHERE idempotency_key "
                "LIKE 'chaos-%' GROUP BY idempotency_key HAVING count(*) > 1) d"),
            "0");
  // Nothing half written: every job has its one submission event.
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs j WHERE j.idempotency_key LIKE 'chaos-%' AND "
                "(SELECT count(*) FROM job_events e WHERE e.job_id = j.id AND e.type = 'state') "
                "<> 1"),
            "0");
  std::lock_guard<std::mutex> lock(tally.mu);
  for (const std::string& key : tally.done) {
    ASSERT_EQ(Sql("SELECT count(*) FROM jobs WHERE idempotency_key = '" + key + "'"), "1") << key;
  }
  // Still serving, without a restart.
  EXPECT_EQ(Readyz(), 200);
  EXPECT_EQ(Call("GET", "/v1/jobs?limit=5", Admin()).status, 200);
}

}  // namespace
}  // namespace controlplane
