// Fixture of the service unit tests (controlplane/service/*_test.cc, label unit): an in-memory
// twin of the stores (memory_database.h), a settable clock, a data directory of its own, and
// short ways to make tenants, people with real tokens, nodes with their credentials, and jobs.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "common/crypto.h"
#include "controlplane/service/auth.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/log_files.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/testing/memory_database.h"

namespace controlplane::testing {

class MemoryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/embody-service-test-XXXXXX";
    data_dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override {
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_);
  }

  service::Clock clock() {
    return [this] { return now_.load(); };
  }

  std::unique_ptr<service::UnitOfWork> Begin() {
    auto uow = db_.Begin();
    EXPECT_TRUE(uow.ok()) << uow.status().ToString();
    return uow.ok() ? std::move(uow.value()) : nullptr;
  }

  // A tenant with `quota`; returns its id.
  int64_t AddTenant(const std::string& name, service::Quota quota = {}) {
    auto uow = Begin();
    service::TenantRecord t;
    t.name = name;
    t.quota = quota;
    auto id = uow->tenants().CreateTenant(t, now_.load());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    return id.ok() ? *id : 0;
  }

  // A token of `role` in `tenant_id` and the principal the server resolves it to; `secret`
  // (optional) gets the bearer token.
  service::Principal AddPerson(int64_t tenant_id, const std::string& role,
                               std::string* secret = nullptr) {
    const std::string token = common::RandomToken();
    auto uow = Begin();
    service::NewToken t;
    t.sha256_hex = common::Sha256Hex(token);
    t.tenant_id = tenant_id;
    t.role = role;
    t.name = role + "-" + std::to_string(++people_);
    t.now_ms = now_.load();
    auto id = uow->tenants().CreateToken(t);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->Commit().ok());
    if (secret) *secret = token;
    return Resolve(token);
  }

  service::Principal Resolve(const std::string& token) {
    auto p = service::Authenticate(db_, "Bearer " + token, now_.load());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : service::Principal{};
  }

  // Registers a node through the join token of `join` and returns its credential's principal.
  service::Principal AddNode(service::NodeService& nodes, const service::Principal& join,
                             const std::string& name, int cpu, int64_t* node_id) {
    auto reg = nodes.Register(join, {name, "127.0.0.1", "http://" + name, cpu, 0, {}, {}});
    EXPECT_TRUE(reg.ok()) << reg.status().ToString();
    if (!reg.ok()) return {};
    *node_id = reg->node_id;
    return Resolve(reg->node_token);
  }

  // A node put straight into the store, draining unless asked otherwise: submissions that fit
  // it are admitted, and none is placed on it.
  int64_t ParkNode(const std::string& name, int cpu, bool draining = true) {
    auto uow = Begin();
    auto id = uow->nodes().Upsert({name, "127.0.0.9", "", cpu, 0, {}, {}}, now_.load());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(uow->nodes().SetDraining(*id, draining).ok());
    EXPECT_TRUE(uow->Commit().ok());
    return id.ok() ? *id : 0;
  }

  service::JobsService Jobs(std::function<void()> wake = nullptr) {
    return service::JobsService(db_, api::SpecLimits{}, clock(), std::move(wake));
  }

  // A command job; `extra` is spliced into the spec object (",\"priority\":90").
  static std::string Spec(const std::string& name, int nodes = 1, int ranks_per_node = 1,
                          const std::string& extra = "") {
    return R"({"name":")" + name +
           R"(","kind":"command","command":["true"],"resources":{"nodes":)" +
           std::to_string(nodes) + R"(,"ranks_per_node":)" + std::to_string(ranks_per_node) + "}" +
           extra + "}";
  }

  // A job of `submitter` (`spec`, a command job unless given) placed on `node_id` with `ranks`
  // ranks (SCHEDULED, its head there), as the scheduler commits it.
  int64_t PlacedJob(const service::Principal& submitter, int64_t node_id,
                    const std::string& spec = Spec("placed"), int ranks = 1) {
    auto jobs = Jobs();
    auto sub = jobs.Submit(submitter, spec, "");
    EXPECT_TRUE(sub.ok()) << sub.status().ToString();
    if (!sub.ok()) return 0;
    auto uow = Begin();
    const int64_t id = sub->job.job.id;
    EXPECT_TRUE(
        uow->allocations().Insert({id, node_id, "", "", ranks, ranks, "cpu", true, false}).ok());
    service::JobRecord j = **uow->jobs().Get(id, std::nullopt, true);
    j.state = api::JobState::kScheduled;
    EXPECT_TRUE(uow->jobs().Update(j).ok());
    EXPECT_TRUE(uow->Commit().ok());
    return id;
  }

  int64_t CountJobs() {
    auto uow = Begin();
    service::JobQuery q;
    q.limit = 1000;
    return static_cast<int64_t>(uow->jobs().List(q)->size());
  }

  std::vector<service::EventRecord> EventsOf(int64_t job_id, const std::string& type = "") {
    auto uow = Begin();
    return *uow->events().List(job_id, 0, type, 1000);
  }

  service::JobRecord JobRow(int64_t id) {
    auto uow = Begin();
    auto j = uow->jobs().Get(id, std::nullopt, false);
    EXPECT_TRUE(j.ok() && j->has_value());
    return j.ok() && j->has_value() ? **j : service::JobRecord{};
  }

  MemoryDatabase db_;
  std::atomic<int64_t> now_{1'700'000'000'000};
  std::string data_dir_;
  int people_ = 0;
};

// Two tenants, "a" and "b", with a member each (member_ of a, other_ of b), and a parked node
// of 8 slots so jobs that fit stay PENDING rather than being refused: where the jobs and
// evaluations tests start.
class TwoTenantServiceTest : public MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    a_ = AddTenant("a");
    b_ = AddTenant("b");
    member_ = AddPerson(a_, "member");
    other_ = AddPerson(b_, "member");
    ParkNode("parked", 8);
  }
  int64_t a_ = 0, b_ = 0;
  service::Principal member_, other_;
};

// The node service tests' start: tenant "a" with an agent join token and a member, and a
// NodeService over the store at `heartbeat_interval_ms`, built with `hooks`.
class NodeServiceFixture : public MemoryServiceTest {
 protected:
  void SetUpNodeService(int heartbeat_interval_ms, service::NodeServiceHooks hooks = {}) {
    a_ = AddTenant("a");
    join_ = AddPerson(a_, "agent");
    member_ = AddPerson(a_, "member");
    files_ = std::make_unique<service::LogFiles>(data_dir_);
    nodes_ = std::make_unique<service::NodeService>(db_, *files_, heartbeat_interval_ms, clock(),
                                                    nullptr, std::move(hooks));
  }

  int64_t a_ = 0;
  service::Principal join_, member_;
  std::unique_ptr<service::LogFiles> files_;
  std::unique_ptr<service::NodeService> nodes_;
};

}  // namespace controlplane::testing
