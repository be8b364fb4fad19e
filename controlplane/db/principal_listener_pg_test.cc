// The principal cache across server replicas, on PostgreSQL (label pg): two replicas (a pool,
// a watched database, a cache and a listener each) on one database. A revocation committed by
// one is refused by it from the next call and by the other as soon as the notification of
// migration 0017's trigger reaches it; an operator's SQL reaches both; a change rolled back
// notifies nobody; and a replica whose listening session is killed or stops answering turns its
// cache off until it listens again. The single-replica rules are service/principal_cache_test.cc.
#include "controlplane/db/principal_listener.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "common/crypto.h"
#include "controlplane/db/stores.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/tokens_service.h"
#include "controlplane/testing/pg_database_fixture.h"

namespace controlplane {
namespace {

using Clock = std::chrono::steady_clock;

struct Replica {
  Replica(const std::string& conninfo, db::PrincipalListener::Options o) {
    auto p = db::PgPool::Open(conninfo, 4);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    pool = std::move(p.value());
    pg = std::make_unique<db::PgDatabase>(*pool);
    watched = std::make_unique<service::PrincipalWatchedDatabase>(*pg, cache);
    listener = std::make_unique<db::PrincipalListener>(*pool, cache, o);
    listener->Start();
  }
  common::Result<service::Principal> Auth(const std::string& secret, int64_t now_ms) {
    return service::Authenticate(*watched, &cache, "Bearer " + secret, now_ms);
  }
  std::unique_ptr<db::PgPool> pool;
  std::unique_ptr<db::PgDatabase> pg;
  service::PrincipalCache cache;
  std::unique_ptr<service::PrincipalWatchedDatabase> watched;
  std::unique_ptr<db::PrincipalListener> listener;
};

// Waits up to `ms` for `done`; returns the milliseconds it took, or -1.
template <typename F>
int64_t WaitFor(F done, int ms = 3000) {
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::milliseconds(ms)) {
    if (done()) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return -1;
}

class PrincipalListenerPgTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::PgBackend::SetUpSuite(); }

  void SetUp() override {
    static int counter = 0;
    auto info =
        testing::PgBackend::cluster()->CreateDatabase("principals_" + std::to_string(++counter));
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    {
      auto pool = db::PgPool::Open(*info, 1);
      ASSERT_TRUE(pool.ok());
      ASSERT_TRUE(db::ApplyMigrations(**pool, db::EmbeddedMigrations()).ok());
    }
    db::PrincipalListener::Options o;
    o.poll_ms = 50;
    o.ping_interval_ms = 200;
    o.ping_timeout_ms = 400;
    o.reconnect_ms = 100;
    a_ = std::make_unique<Replica>(*info, o);
    b_ = std::make_unique<Replica>(*info, o);
    ASSERT_GE(WaitFor([&] { return a_->listener->listening() && b_->listener->listening(); }), 0);
    tenant_ = AddTenant("acme");
    admin_secret_ = AddToken(tenant_, "cluster-admin");
    admin_ = *a_->Auth(admin_secret_, now_);
  }

  int64_t AddTenant(const std::string& name) {
    auto uow = a_->pg->Begin();
    EXPECT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = name;
    auto id = (*uow)->tenants().CreateTenant(t, now_);
    EXPECT_TRUE(id.ok() && (*uow)->Commit().ok());
    return id.ok() ? *id : 0;
  }
  std::string AddToken(int64_t tenant, const std::string& role) {
    const std::string secret = common::RandomToken();
    auto uow = a_->pg->Begin();
    EXPECT_TRUE(uow.ok());
    service::NewToken t;
    t.sha256_hex = common::Sha256Hex(secret);
    t.tenant_id = tenant;
    t.role = role;
    t.name = role;
    t.now_ms = now_;
    EXPECT_TRUE((*uow)->tenants().CreateToken(t).ok() && (*uow)->Commit().ok());
    return secret;
  }
  // Authenticates twice on `r`; the second must come from its cache.
  void Warm(Replica& r, const std::string& secret) {
    ASSERT_TRUE(r.Auth(secret, now_).ok());
    const uint64_t misses = r.cache.GetStats().misses;
    ASSERT_TRUE(r.Auth(secret, now_).ok());
    ASSERT_EQ(r.cache.GetStats().misses, misses) << "not answered from the cache";
  }
  // Runs `sql` on a connection of replica A's pool, outside any watched database: as an
  // operator at a psql prompt would.
  void Sql(const std::string& sql) {
    auto lease = a_->pool->Acquire();
    ASSERT_TRUE(lease.ok());
    auto r = db::ExecScript(lease->get(), sql);
    ASSERT_TRUE(r.ok()) << r.ToString();
  }
  // The backend pid of replica B's listening session.
  int ListenerPid() {
    auto lease = a_->pool->Acquire();
    EXPECT_TRUE(lease.ok());
    auto r = db::Exec(lease->get(),
                      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND"
                      " application_name = 'embody-principal-listener' AND query LIKE 'SELECT 1%'"
                      " ORDER BY backend_start DESC LIMIT 1");
    EXPECT_TRUE(r.ok());
    return r.ok() && !r->empty() ? static_cast<int>(r->Int(0, "pid")) : 0;
  }

  int64_t now_ = 1'700'000'000'000;
  std::unique_ptr<Replica> a_, b_;
  int64_t tenant_ = 0;
  std::string admin_secret_;
  service::Principal admin_;
};

TEST_F(PrincipalListenerPgTest, ARevocationIsRefusedAtOnceHereAndOnNotificationElsewhere) {
  const std::string secret = AddToken(tenant_, "member");
  Warm(*a_, secret);
  Warm(*b_, secret);
  const int64_t token_id = a_->Auth(secret, now_)->token_id;
  const uint64_t heard = b_->listener->notifications();
  service::TokensService tokens(*a_->watched, [this] { return now_; });
  ASSERT_TRUE(tokens.Revoke(admin_, token_id).ok());
  // The replica that revoked: from its very next call.
  EXPECT_EQ(a_->Auth(secret, now_).status().message(), "token revoked");
  // The other: once the notification arrives (milliseconds), and never back.
  const int64_t took = WaitFor([&] { return !b_->Auth(secret, now_).ok(); });
  ASSERT_GE(took, 0) << "the other replica still accepts the revoked token";
  EXPECT_GT(b_->listener->notifications(), heard);
  EXPECT_EQ(b_->Auth(secret, now_).status().message(), "token revoked");
  std::printf("revocation reached the other replica after %lld ms\n", static_cast<long long>(took));
}

TEST_F(PrincipalListenerPgTest, AnOperatorsSqlReachesEveryReplica) {
  const int64_t doomed = AddTenant("doomed");
  const std::string secret = AddToken(doomed, "tenant-admin");
  const std::string other = AddToken(tenant_, "member");
  Warm(*a_, secret);
  Warm(*b_, secret);
  Warm(*b_, other);
  // Neither replica's watched database sees this: only the trigger's notification tells them.
  Sql("BEGIN; DELETE FROM tokens WHERE tenant_id = " + std::to_string(doomed) +
      "; DELETE FROM tenants WHERE id = " + std::to_string(doomed) + "; COMMIT");
  for (Replica* r : {a_.get(), b_.get()}) {
    ASSERT_GE(WaitFor([&] { return !r->Auth(secret, now_).ok(); }), 0);
    EXPECT_EQ(r->Auth(secret, now_).status().message(), "unknown token");
  }
  EXPECT_TRUE(b_->Auth(other, now_).ok());  // the others are read afresh, unchanged
  // A tenant renamed by hand is seen too.
  Warm(*b_, other);
  Sql("UPDATE tenants SET name = 'acme2' WHERE id = " + std::to_string(tenant_));
  ASSERT_GE(WaitFor([&] { return b_->Auth(other, now_)->tenant == "acme2"; }), 0);
}

TEST_F(PrincipalListenerPgTest, AChangeRolledBackNotifiesNobody) {
  const uint64_t heard = b_->listener->notifications();
  Sql("BEGIN; UPDATE tokens SET revoked_at = now(); ROLLBACK");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(b_->listener->notifications(), heard);
  Sql("UPDATE tokens SET name = name WHERE id = 0");  // no row, still a change statement
  EXPECT_GE(WaitFor([&] { return b_->listener->notifications() > heard; }), 0);
}

TEST_F(PrincipalListenerPgTest, TheCacheIsOffWhileTheListeningSessionIsGone) {
  const std::string secret = AddToken(tenant_, "member");
  Warm(*b_, secret);
  const uint64_t sessions = b_->listener->sessions();
  Sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
      " AND application_name = 'embody-principal-listener'");
  // Off as soon as the session is found gone...
  ASSERT_GE(WaitFor([&] { return !b_->cache.GetStats().enabled; }), 0);
  EXPECT_EQ(b_->cache.GetStats().entries, 0u);
  // ...and on again, empty, once it listens anew.
  ASSERT_GE(WaitFor([&] { return b_->listener->sessions() > sessions; }), 0);
  EXPECT_TRUE(b_->cache.GetStats().enabled);
  const uint64_t misses = b_->cache.GetStats().misses;
  EXPECT_TRUE(b_->Auth(secret, now_).ok());
  EXPECT_EQ(b_->cache.GetStats().misses, misses + 1);
}

TEST_F(PrincipalListenerPgTest, ASessionThatStopsAnsweringTurnsTheCacheOff) {
  Warm(*b_, AddToken(tenant_, "member"));
  // Frozen, as behind a network partition: the socket stays open, nothing comes back.
  int pid = 0;
  ASSERT_GE(WaitFor([&] { return (pid = ListenerPid()) > 0; }), 0) << "no listener caught pinging";
  // Both replicas' listeners ping; freeze whichever was caught and watch its replica.
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const int64_t took =
      WaitFor([&] { return !a_->cache.GetStats().enabled || !b_->cache.GetStats().enabled; });
  ::kill(pid, SIGCONT);
  ASSERT_GE(took, 0) << "a frozen listening session left the cache on";
  // ping interval 200 ms + ping timeout 400 ms, and the poll: well under a second.
  EXPECT_LT(took, 1500);
}

}  // namespace
}  // namespace controlplane
