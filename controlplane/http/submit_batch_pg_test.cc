// POST /v1/jobs through a server with the submission batcher on (label pg): concurrent
// submissions share transactions, and each 201's job is stored exactly once, with its first
// state event and its audit row written by the same transaction as the job; a tenant's pending
// quota is judged member by member; an idempotency key sent by several members at once gives
// one job.
//
// The window is long (50 ms) and a batch closes at the number of clients of the first test, so
// batches of several members are certain rather than a matter of timing.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "controlplane/testing/pg_server_fixture.h"

namespace controlplane {
namespace {

using nlohmann::json;

constexpr int kClients = 24;

class SubmitBatchPgTest : public InProcessServerTest {
 protected:
  static void SetUpTestSuite() {
    StartServer("submit-batch", 1000, "", [](ServerOptions& o) {
      o.submit_batch_window_us = 50'000;
      o.submit_batch_max = kClients;
    });
  }

  static std::string One(const std::string& sql) {
    auto out = pg_->Psql(sql);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    std::string v = out.ok() ? *out : "";
    while (!v.empty() && v.back() == '\n') v.pop_back();
    return v;
  }

  // A member token of `tenant` (0: the admin's own tenant), and its tenant's id.
  static std::string MemberOf(int64_t tenant, const std::string& name, int64_t* tenant_id) {
    json req = {{"role", "member"}, {"name", name}};
    if (tenant) req["tenant_id"] = tenant;
    Reply r = Call("POST", "/v1/tokens", Admin(), req.dump());
    EXPECT_EQ(r.status, 201) << r.text;
    if (tenant_id) *tenant_id = r.body.value("tenant_id", int64_t{0});
    return r.body.value("token", "");
  }

  // `n` POST /v1/jobs at once, request i with `headers(i)`; replies in request order.
  static std::vector<Reply> SubmitAll(int n, const std::string& token,
                                      const std::function<httplib::Headers(int)>& headers) {
    std::vector<Reply> out(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        out[i] = Call("POST", "/v1/jobs", token, PendingSpec("b-" + std::to_string(i)).dump(),
                      headers(i));
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }
};

TEST_F(SubmitBatchPgTest, EachAcceptedJobIsStoredOnceWithItsEventAndAuditRowInOneTransaction) {
  int64_t tenant = 0;
  const std::string member = MemberOf(0, "batch-member", &tenant);
  const std::string tid = std::to_string(tenant);
  // The route's success status is learnt from its first answer (audit_scope.h): after this one
  // every row is final as committed.
  ASSERT_EQ(Call("POST", "/v1/jobs", member, PendingSpec("first").dump()).status, 201);
  auto replies = SubmitAll(kClients, member, [](int i) {
    return httplib::Headers{{"X-Request-Id", "batch-" + std::to_string(i)}};
  });
  std::set<std::string> txids;
  std::set<int64_t> ids;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_EQ(replies[i].status, 201) << replies[i].text;
    const int64_t id = replies[i].body["id"];
    EXPECT_EQ(replies[i].body["name"], "b-" + std::to_string(i));
    ids.insert(id);
    const std::string job = std::to_string(id);
    EXPECT_EQ(One("SELECT count(*) FROM jobs WHERE id = " + job), "1");
    EXPECT_EQ(One("SELECT count(*) FROM job_events WHERE type = 'state' AND job_id = " + job),
              "1");
    const std::string req = "'batch-" + std::to_string(i) + "'";
    EXPECT_EQ(One("SELECT count(*) || ' ' || min(status) || ' ' || min(target) FROM audit_log"
                  " WHERE request_id = " + req),
              "1 201 job " + job);
    // Its first state event and its audit row: one transaction (the job row itself is
    // rewritten by the scheduler with its waiting reason).
    const std::string event_tx =
        One("SELECT xmin FROM job_events WHERE type = 'state' AND job_id = " + job);
    EXPECT_EQ(One("SELECT xmin FROM audit_log WHERE request_id = " + req), event_tx);
    txids.insert(event_tx);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kClients));
  // Batched: fewer transactions than jobs (one, unless the machine stalled a client 50 ms).
  EXPECT_LT(txids.size(), static_cast<size_t>(kClients) / 2);
  // The kept pending count moved by as many jobs as were written.
  EXPECT_EQ(One("SELECT jobs FROM tenant_pending_jobs WHERE tenant_id = " + tid),
            One("SELECT count(*) FROM jobs WHERE tenant_id = " + tid + " AND state = 'PENDING'"));
}

TEST_F(SubmitBatchPgTest, APendingQuotaIsJudgedMemberByMemberAndOneKeyGivesOneJob) {
  Reply t = Call("POST", "/v1/tenants", Admin(), json{{"name", "quota-batch"}}.dump());
  ASSERT_EQ(t.status, 201) << t.text;
  const int64_t tenant = t.body["id"];
  Reply q = Call("PATCH", "/v1/tenants/" + std::to_string(tenant), Admin(),
                 json{{"quota", {{"pending_jobs", 3}}}}.dump(), {{"If-Match", "*"}});
  ASSERT_EQ(q.status, 200) << q.text;
  const std::string member = MemberOf(tenant, "quota-member", nullptr);
  auto replies = SubmitAll(kClients, member, [](int) { return httplib::Headers{}; });
  int accepted = 0, refused = 0;
  for (const Reply& r : replies) {
    if (r.status == 201) ++accepted;
    if (r.status == 429) {
      ++refused;
      EXPECT_EQ(r.body["error"]["field"], "quota.pending_jobs") << r.text;
    }
  }
  EXPECT_EQ(accepted, 3);
  EXPECT_EQ(refused, kClients - 3);
  const std::string tid = std::to_string(tenant);
  EXPECT_EQ(One("SELECT count(*) FROM jobs WHERE tenant_id = " + tid), "3");
  EXPECT_EQ(One("SELECT jobs FROM tenant_pending_jobs WHERE tenant_id = " + tid), "3");

  // One key from every client at once (the same body): one job, the others replay it.
  const std::string other = MemberOf(0, "key-member", nullptr);
  std::vector<Reply> keyed(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      keyed[i] = Call("POST", "/v1/jobs", other, PendingSpec("keyed").dump(),
                      {{"Idempotency-Key", "batch-key"}});
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> ids;
  int created = 0;
  for (const Reply& r : keyed) {
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r.status << " " << r.text;
    created += r.status == 201 ? 1 : 0;
    ids.insert(r.body["id"].get<int64_t>());
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(created, 1);
  EXPECT_EQ(One("SELECT count(*) FROM jobs WHERE idempotency_key = 'batch-key'"), "1");
}

}  // namespace
}  // namespace controlplane
