// Service flows over the stores, as one typed gtest suite run against PostgreSQL
// (db/stores_pg_test.cc, label pg) and the in-memory twin (testing/memory_database_test.cc,
// label unit): job listing and tenant isolation, idempotent submits, state transitions and their
// events, scheduling, launch, finish and node loss, time limits. The same services must come to
// the same states on both; the twin's own service tests (service/*_test.cc) go further.
//
// The Backend concept is store_conformance.h's.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "controlplane/service/auth.h"
#include "controlplane/service/history_retention.h"
#include "controlplane/service/jobs_service.h"
#include "controlplane/service/log_files.h"
#include "controlplane/service/node_service.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/service/transitions.h"

namespace controlplane::testing {

using service::Principal;

template <typename Backend>
class ServiceFlowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { Backend::SetUpSuite(); }
  static void TearDownTestSuite() { Backend::TearDownSuite(); }

  void SetUp() override {
    backend_.Open("flows");
    if (HasFatalFailure()) return;
    std::string tmpl = "/tmp/embody-flows-data-XXXXXX";
    data_dir_ = mkdtemp(tmpl.data());
    // A draining node large enough for every job here: submissions are admitted (the cluster
    // could run them) and none is placed on it.
    auto uow = db().Begin();
    ASSERT_TRUE(uow.ok());
    api::RegisterRequest parked{"parked", "127.0.0.9", "", 64, 0, {}, {}};
    auto id = (*uow)->nodes().Upsert(parked, now_.load());
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*uow)->nodes().SetDraining(*id, true).ok());
    ASSERT_TRUE((*uow)->Commit().ok());
  }
  void TearDown() override {
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_);
  }

  service::Database& db() { return backend_.database(); }

  static Principal Person(int64_t tenant_id, const std::string& tenant, const std::string& role) {
    Principal p;
    p.tenant_id = tenant_id;
    p.tenant = tenant;
    p.role = role;
    p.token_name = role;
    return p;
  }

  Principal MakeTenant(const std::string& name, const std::string& role = "member") {
    auto uow = db().Begin();
    EXPECT_TRUE(uow.ok());
    service::TenantRecord t;
    t.name = name;
    auto id = (*uow)->tenants().CreateTenant(t, now_.load());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE((*uow)->Commit().ok());
    return Person(*id, name, role);
  }

  // The node service and the scheduler loop on this suite's clock, with one 2-slot node `name`
  // registered by tenant `a`'s agent join; `node` acts as that node's agent.
  struct Cluster {
    Cluster(service::Database& db, const std::string& dir, std::function<int64_t()> clock)
        : files(dir),
          nodes(db, files, 1000, clock, nullptr),
          loop(db, {1000, 500, 1000, {}}, clock, nullptr, nullptr) {}
    service::LogFiles files;
    service::NodeService nodes;
    service::SchedulerLoop loop;
    api::RegisterResponse reg;
    Principal node;
  };
  std::unique_ptr<Cluster> MakeCluster(const Principal& a, const std::string& name) {
    auto c = std::make_unique<Cluster>(db(), data_dir_, [this] { return now_.load(); });
    auto reg = c->nodes.Register(Person(a.tenant_id, "a", "agent"),
                                 {name, "127.0.0.1", "", 2, 0, {}, {}});
    EXPECT_TRUE(reg.ok()) << reg.status().ToString();
    if (!reg.ok()) return nullptr;
    c->reg = *reg;
    c->node = Resolve(reg->node_token);
    return c;
  }

  // A principal as the server would resolve it from `token`.
  Principal Resolve(const std::string& token) {
    auto p = service::Authenticate(db(), "Bearer " + token, now_.load());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : Principal{};
  }

  service::JobsService Jobs() {
    return service::JobsService(
        db(), api::SpecLimits{}, [this] { return now_.load(); }, nullptr);
  }

  static std::string Spec(const std::string& name, int nodes = 1, int max_restarts = 0) {
    return R"({"name":")" + name + R"(","kind":"command","command":["true"],"max_restarts":)" +
           std::to_string(max_restarts) + R"(,"resources":{"nodes":)" + std::to_string(nodes) +
           "}}";
  }

  Backend backend_;
  std::string data_dir_;
  std::atomic<int64_t> now_{1'700'000'000'000};
};

TYPED_TEST_SUITE_P(ServiceFlowTest);

TYPED_TEST_P(ServiceFlowTest, ListPaginatesNewestFirstWithinTenant) {
  Principal a = this->MakeTenant("a"), b = this->MakeTenant("b");
  auto jobs = this->Jobs();
  std::vector<int64_t> a_ids;
  for (int i = 0; i < 5; ++i) {
    auto r = jobs.Submit(a, this->Spec("a" + std::to_string(i)), "");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    a_ids.push_back(r->job.job.id);
    auto rb = jobs.Submit(b, this->Spec("b" + std::to_string(i)), "");
    ASSERT_TRUE(rb.ok());
  }
  std::vector<int64_t> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto page = jobs.List(a, 2, cursor, "");
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& v : page->jobs) {
      EXPECT_EQ(v.job.tenant, "a");
      seen.push_back(v.job.id);
    }
    cursor = page->next_cursor.value_or("");
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  std::vector<int64_t> want(a_ids.rbegin(), a_ids.rend());
  EXPECT_EQ(seen, want);

  // Another tenant's job does not exist for you; a cluster-admin sees every tenant.
  auto other = jobs.Get(b, a_ids[0]);
  EXPECT_EQ(other.status().code(), common::Code::kNotFound);
  EXPECT_EQ(jobs.Cancel(b, a_ids[0]).status().code(), common::Code::kNotFound);
  Principal admin = this->Person(a.tenant_id, "a", "cluster-admin");
  auto all = jobs.List(admin, 100, "", "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs.size(), 10u);
  auto pending = jobs.List(b, 100, "", "PENDING");
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->jobs.size(), 5u);
  EXPECT_EQ(jobs.List(a, 0, "", "").status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(jobs.List(a, 10, "x", "").status().code(), common::Code::kInvalidArgument);
}

TYPED_TEST_P(ServiceFlowTest, IdempotencyKeyReturnsTheSameJob) {
  Principal a = this->MakeTenant("a"), b = this->MakeTenant("b");
  auto jobs = this->Jobs();
  auto first = jobs.Submit(a, this->Spec("x"), "key-1");
  auto again = jobs.Submit(a, this->Spec("x"), "key-1");
  auto other_tenant = jobs.Submit(b, this->Spec("x"), "key-1");
  ASSERT_TRUE(first.ok() && again.ok() && other_tenant.ok());
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(first->job.job.id, again->job.job.id);
  EXPECT_NE(first->job.job.id, other_tenant->job.job.id);
}

TYPED_TEST_P(ServiceFlowTest, TransitionsWriteStateEventsAndRejectIllegalMoves) {
  Principal a = this->MakeTenant("a");
  auto jobs = this->Jobs();
  auto sub = jobs.Submit(a, this->Spec("t"), "");
  ASSERT_TRUE(sub.ok());
  const int64_t id = sub->job.job.id;
  auto cancelled = jobs.Cancel(a, id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  EXPECT_EQ(cancelled->job.state, api::JobState::kCancelled);
  EXPECT_TRUE(cancelled->job.finished_ms.has_value());
  EXPECT_EQ(jobs.Cancel(a, id).status().code(), common::Code::kFailedPrecondition);

  auto events = jobs.Events(a, id, 0, "state", 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].data["to"], "PENDING");
  EXPECT_EQ((*events)[1].data["from"], "PENDING");
  EXPECT_EQ((*events)[1].data["to"], "CANCELLED");
  EXPECT_EQ((*events)[1].data["actor"], "a/member");

  // An illegal transition changes nothing and writes no event.
  auto uow = this->db().Begin();
  ASSERT_TRUE(uow.ok());
  auto job = (*uow)->jobs().Get(id, std::nullopt, true);
  ASSERT_TRUE(job.ok() && job->has_value());
  auto st = service::Transition(**uow, **job, api::JobState::kRunning, "", "test", this->now_);
  EXPECT_EQ(st.code(), common::Code::kFailedPrecondition);
  ASSERT_TRUE((*uow)->Commit().ok());
  EXPECT_EQ(jobs.Events(a, id, 0, "", 100)->size(), 2u);
  EXPECT_EQ(jobs.Events(a, id, (*events)[0].id, "", 100)->size(), 1u);
}

TYPED_TEST_P(ServiceFlowTest, ScheduleLaunchFinishAndNodeLoss) {
  Principal a = this->MakeTenant("a");
  Principal join = this->Person(a.tenant_id, "a", "agent");
  auto jobs = this->Jobs();
  service::LogFiles files(this->data_dir_);
  auto clock = [this] { return this->now_.load(); };
  service::NodeService nodes(this->db(), files, 1000, clock, nullptr);
  service::SchedulerLoop loop(this->db(), {1000, 500, 1000, {}}, clock, nullptr, nullptr);

  api::RegisterRequest reg{"node-a", "127.0.0.1", "http://127.0.0.1:1", 2, 0, {}, {}};
  auto node = nodes.Register(join, reg);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_FALSE(node->node_token.empty());
  Principal agent = this->Resolve(node->node_token);
  EXPECT_EQ(agent.role, "node");
  EXPECT_EQ(agent.node_id, node->node_id);
  EXPECT_EQ(nodes.Register(a, reg).status().code(), common::Code::kPermissionDenied);
  // The join token cannot take the name of a live node; its own credential re-registers it.
  EXPECT_EQ(nodes.Register(join, reg).status().code(), common::Code::kAlreadyExists);
  auto again = nodes.Register(agent, reg);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->node_id, node->node_id);
  EXPECT_TRUE(again->node_token.empty());
  // The join token is no node credential, and a credential acts for its own node only.
  EXPECT_EQ(nodes.Heartbeat(join, node->node_id, {}).status().code(),
            common::Code::kPermissionDenied);
  EXPECT_EQ(nodes.Heartbeat(agent, node->node_id + 1000, {}).status().code(),
            common::Code::kPermissionDenied);
  auto ok_job = jobs.Submit(a, this->Spec("ok"), "");
  auto too_big = jobs.Submit(a, this->Spec("big", 2), "");
  auto restartable = jobs.Submit(a, this->Spec("again", 1, 1), "");
  ASSERT_TRUE(ok_job.ok() && too_big.ok() && restartable.ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(a, ok_job->job.job.id)->job.state, api::JobState::kScheduled);
  EXPECT_EQ(jobs.Get(a, restartable->job.job.id)->job.state, api::JobState::kScheduled);
  auto big = jobs.Get(a, too_big->job.job.id);
  EXPECT_EQ(big->job.state, api::JobState::kPending);
  EXPECT_EQ(big->job.reason,
            "waiting for 2 nodes with 1 free cpu slots each (1 fit); no reservation: too few nodes "
            "are expected to free up (jobs without a time limit, or reserved for jobs ahead)");

  // The head agent gets each launch until it acknowledges it.
  auto hb = nodes.Heartbeat(agent, node->node_id, {});
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  ASSERT_EQ(hb->commands.size(), 2u);
  EXPECT_EQ(hb->commands[0].type, api::Command::Type::kLaunch);
  EXPECT_EQ(hb->commands[0].hosts.at(0).name, "node-a");
  api::HeartbeatRequest acks;
  acks.has_launched = true;
  acks.launched = {{ok_job->job.job.id, 0}, {restartable->job.job.id, 0}};
  EXPECT_EQ(nodes.Heartbeat(agent, node->node_id, acks)->commands.size(), 0u);

  api::HeartbeatRequest report;
  report.running = {ok_job->job.job.id, restartable->job.job.id};
  report.events = {
      {ok_job->job.job.id, 0, "step", {{"step", 5}, {"loss", 0.5}}},
      {ok_job->job.job.id, 0, "checkpoint", {{"step", 5}, {"path", "/c"}, {"bytes", 9}}},
      {restartable->job.job.id,
       0,
       "checkpoint",
       {{"step", 7}, {"path", "/again/step-7.ckpt"}, {"bytes", 9}}}};
  report.logs = {{ok_job->job.job.id, 0, 0, "line\n"}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node->node_id, report).ok());
  auto running = jobs.Get(a, ok_job->job.job.id);
  EXPECT_EQ(running->job.state, api::JobState::kRunning);
  EXPECT_EQ((*running->last_step)["step"], 5);
  EXPECT_EQ(running->latest_checkpoint->path, "/c");
  ASSERT_TRUE(nodes.Heartbeat(agent, node->node_id, report).ok());  // a retry: no duplicate bytes
  auto logs = jobs.Logs(a, ok_job->job.job.id);
  ASSERT_EQ(logs->logs.size(), 1u);
  EXPECT_EQ(logs->logs[0].bytes, 5);

  api::HeartbeatRequest done;
  done.finished = {{ok_job->job.job.id, 3, ""}};
  ASSERT_TRUE(nodes.Heartbeat(agent, node->node_id, done).ok());
  auto failed = jobs.Get(a, ok_job->job.job.id);
  EXPECT_EQ(failed->job.state, api::JobState::kFailed);
  EXPECT_EQ(failed->job.exit_code, 3);
  EXPECT_EQ(failed->job.reason, "exited with code 3");
  // The job keeps the record of where it ran; its slots are free again.
  EXPECT_EQ(failed->allocation.size(), 1u);

  // Silence for more than 3 intervals: the node is DOWN and its job restarts (attempt 1).
  this->now_ += 3500;
  ASSERT_TRUE(loop.RunOnce().ok());
  auto restarted = jobs.Get(a, restartable->job.job.id);
  EXPECT_EQ(restarted->job.state, api::JobState::kPending);
  EXPECT_EQ(restarted->job.attempt, 1);
  auto list = nodes.List(a);
  EXPECT_EQ(list->nodes[0].state, "DOWN");
  auto ev = jobs.Events(a, restartable->job.job.id, 0, "state", 100);
  ASSERT_GE(ev->size(), 4u);
  EXPECT_EQ(ev->back().data["to"], "PENDING");
  EXPECT_EQ((*ev)[ev->size() - 2].data["to"], "RESTARTING");

  // When a node is back, the restarted job is placed again and its launch resumes from the
  // checkpoint the first attempt wrote; a first launch carries none.
  EXPECT_TRUE(hb->commands[0].resume_from.empty());
  // DOWN and reset by an operator, the node may be claimed again by the join token: a new
  // credential, the old one revoked. Without the reset the name stays its own agent's.
  EXPECT_EQ(nodes.Register(join, reg).status().code(), common::Code::kAlreadyExists);
  const Principal admin = this->Person(a.tenant_id, "a", "cluster-admin");
  ASSERT_TRUE(nodes.Reset(admin, node->node_id).ok());
  auto rejoined = nodes.Register(join, reg);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status().ToString();
  EXPECT_EQ(rejoined->node_id, node->node_id);
  EXPECT_EQ(service::Authenticate(this->db(), "Bearer " + node->node_token, this->now_.load())
                .status()
                .message(),
            "token revoked");
  agent = this->Resolve(rejoined->node_token);
  ASSERT_TRUE(loop.RunOnce().ok());
  auto relaunch = nodes.Heartbeat(agent, node->node_id, {});
  ASSERT_TRUE(relaunch.ok()) << relaunch.status().ToString();
  bool found = false;
  for (const auto& c : relaunch->commands) {
    if (c.type != api::Command::Type::kLaunch || c.job_id != restartable->job.job.id) continue;
    found = true;
    EXPECT_EQ(c.attempt, 1);
    EXPECT_EQ(c.resume_from, "/again/step-7.ckpt");
  }
  EXPECT_TRUE(found);
}

TYPED_TEST_P(ServiceFlowTest, RunningJobPastItsTimeLimitIsCancelled) {
  Principal a = this->MakeTenant("a");
  auto jobs = this->Jobs();
  auto cluster = this->MakeCluster(a, "node-t");
  ASSERT_TRUE(cluster);
  auto& nodes = cluster->nodes;
  auto& loop = cluster->loop;
  const api::RegisterResponse* reg = &cluster->reg;
  const Principal& node = cluster->node;
  std::string limited = this->Spec("limited");
  limited.insert(limited.size() - 1, R"(,"time_limit_seconds":5)");
  auto job = jobs.Submit(a, limited, "");
  auto unlimited = jobs.Submit(a, this->Spec("unlimited"), "");
  ASSERT_TRUE(job.ok() && unlimited.ok()) << job.status().ToString();
  ASSERT_TRUE(loop.RunOnce().ok());
  const int64_t id = job->job.job.id, other = unlimited->job.job.id;
  auto launches = nodes.Heartbeat(node, reg->node_id, {});
  ASSERT_TRUE(launches.ok());
  ASSERT_EQ(launches->commands.size(), 2u);
  api::HeartbeatRequest running;
  running.running = {id, other};
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, running).ok());
  this->now_ += 4000;
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, running).ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kRunning);  // 4 s of 5
  this->now_ += 1500;
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, running).ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  auto over = jobs.Get(a, id);
  EXPECT_EQ(over->job.state, api::JobState::kCancelling);
  EXPECT_EQ(over->job.reason, "time limit 5 s reached");
  EXPECT_EQ(jobs.Get(a, other)->job.state, api::JobState::kRunning);
  // Its node is told to kill it; once it reports the exit, the job is CANCELLED.
  auto hb = nodes.Heartbeat(node, reg->node_id, running);
  ASSERT_TRUE(hb.ok());
  ASSERT_EQ(hb->commands.size(), 1u);
  EXPECT_EQ(hb->commands[0].type, api::Command::Type::kKill);
  api::HeartbeatRequest ended;
  ended.finished = {{id, 143, "killed"}};
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, ended).ok());
  EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kCancelled);
}

// A job that posts poison (NUL, which PostgreSQL text and jsonb cannot hold; a field of the
// wrong type; an event too large) cannot fail its node's heartbeats: the bad events are dropped
// alone, the rest stored, and the node stays UP with its jobs running.
TYPED_TEST_P(ServiceFlowTest, PoisonedEventsKeepTheNodeUp) {
  Principal a = this->MakeTenant("a");
  auto jobs = this->Jobs();
  auto cluster = this->MakeCluster(a, "node-p");
  ASSERT_TRUE(cluster);
  auto& nodes = cluster->nodes;
  auto& loop = cluster->loop;
  const api::RegisterResponse* reg = &cluster->reg;
  const Principal& node = cluster->node;
  auto job = jobs.Submit(a, this->Spec("poison"), "");
  ASSERT_TRUE(job.ok());
  const int64_t id = job->job.job.id;
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, {}).ok());
  for (int round = 0; round < 5; ++round) {
    this->now_ += 1000;
    api::HeartbeatRequest hb;
    hb.running = {id};
    hb.events = {
        {id, 0, "step", {{"type", "step"}, {"step", round}, {"loss", 0.5}}},
        {id, 0, "note", {{"type", "note"}, {"text", std::string("a\0b", 3)}}},
        {id, 0, "note", {{"type", "note"}, {std::string("k\0", 2), 1}}},
        {id, 0, "checkpoint", {{"type", "checkpoint"}, {"step", "x"}, {"path", "/c"}}},
        {id, 0, "note", {{"type", "note"}, {"blob", std::string(70 * 1024, 'x')}}},
        {id, 0, "note", {{"type", "note"}, {"round", round}}}};
    auto reply = nodes.Heartbeat(node, reg->node_id, hb);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_TRUE(loop.RunOnce().ok());
  }
  auto listed = nodes.List(a);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  for (const auto& n : listed->nodes) {
    if (n.name == "node-p") {
      EXPECT_EQ(n.state, "UP");
    }
  }
  auto view = jobs.Get(a, id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->job.state, api::JobState::kRunning);
  EXPECT_EQ((*view->last_step)["step"], 4);
  EXPECT_EQ(jobs.Events(a, id, 0, "note", 100)->size(), 5u);
  EXPECT_EQ(nodes.EventsDropped().at("bad_text"), 10u);
  EXPECT_EQ(nodes.EventsDropped().at("bad_field"), 5u);
  EXPECT_EQ(nodes.EventsDropped().at("too_large"), 5u);
}

// A launch whose reply was lost (the agent's client timed out after the server committed it) is
// handed out again in every reply until the agent acknowledges it; one never acknowledged was
// lost by the node, and the job goes back to the queue as after a node loss.
TYPED_TEST_P(ServiceFlowTest, LaunchesAreResentUntilAcknowledged) {
  Principal a = this->MakeTenant("a");
  auto jobs = this->Jobs();
  auto cluster = this->MakeCluster(a, "node-l");
  ASSERT_TRUE(cluster);
  auto& nodes = cluster->nodes;
  auto& loop = cluster->loop;
  const api::RegisterResponse* reg = &cluster->reg;
  const Principal& node = cluster->node;
  auto first = jobs.Submit(a, this->Spec("reply-lost"), "");
  auto never = jobs.Submit(a, this->Spec("never-acked", 1, 1), "");
  ASSERT_TRUE(first.ok() && never.ok());
  const int64_t id = first->job.job.id, lost = never->job.job.id;
  ASSERT_TRUE(loop.RunOnce().ok());
  const auto launches_of = [](const api::HeartbeatResponse& r, int64_t job) {
    int n = 0;
    for (const auto& c : r.commands) n += c.type == api::Command::Type::kLaunch && c.job_id == job;
    return n;
  };
  api::HeartbeatRequest holding_nothing;
  holding_nothing.has_launched = true;
  auto dropped_reply = nodes.Heartbeat(node, reg->node_id, holding_nothing);
  ASSERT_TRUE(dropped_reply.ok());
  EXPECT_EQ(launches_of(*dropped_reply, id), 1);
  // The agent never saw that reply: its next heartbeat holds nothing, and gets both again.
  this->now_ += 1000;
  auto again = nodes.Heartbeat(node, reg->node_id, holding_nothing);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(launches_of(*again, id), 1);
  EXPECT_EQ(launches_of(*again, lost), 1);
  for (const auto& c : again->commands) EXPECT_EQ(c.attempt, 0);
  // It takes the first and lists it; an acknowledgement of another attempt counts for nothing.
  api::HeartbeatRequest holding;
  holding.has_launched = true;
  holding.launched = {{id, 0}, {lost, 7}};
  int sends_of_lost = 2;
  for (int i = 0; i < 20; ++i) {
    this->now_ += 1000;
    auto r = nodes.Heartbeat(node, reg->node_id, holding);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(launches_of(*r, id), 0);  // acknowledged: never handed out again
    if (launches_of(*r, lost) == 0) break;
    ++sends_of_lost;
  }
  EXPECT_EQ(sends_of_lost, service::NodeService::kLaunchSendsBeforeLost);
  EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kScheduled);  // not reported running yet
  auto requeued = jobs.Get(a, lost);
  EXPECT_EQ(requeued->job.state, api::JobState::kPending);
  EXPECT_EQ(requeued->job.attempt, 1);
  EXPECT_NE(requeued->job.reason.find("launch not acknowledged by node node-l"), std::string::npos)
      << requeued->job.reason;
  EXPECT_EQ(nodes.LaunchesLost(), 1u);
  // An older agent, which lists no launches, acknowledges by reporting the job running.
  api::HeartbeatRequest older;
  older.running = {id};
  ASSERT_TRUE(nodes.Heartbeat(node, reg->node_id, older).ok());
  EXPECT_EQ(jobs.Get(a, id)->job.state, api::JobState::kRunning);
  for (const auto& c : nodes.Heartbeat(node, reg->node_id, {})->commands) {
    EXPECT_NE(c.type, api::Command::Type::kLaunch);
  }
}

TYPED_TEST_P(ServiceFlowTest, AJobTheNodeLostRestartsWhileRestartsRemain) {
  // An agent restarted under its jobs stops what was left and reports them lost: the jobs
  // restart (attempt counted against max_restarts) and the node stays UP.
  Principal a = this->MakeTenant("a");
  auto jobs = this->Jobs();
  auto cluster = this->MakeCluster(a, "node-r");
  ASSERT_TRUE(cluster);
  auto& nodes = cluster->nodes;
  auto again = jobs.Submit(a, this->Spec("again", 1, 1), "");
  auto once = jobs.Submit(a, this->Spec("once", 1, 0), "");
  ASSERT_TRUE(again.ok() && once.ok());
  const int64_t r = again->job.job.id, o = once->job.job.id;
  ASSERT_TRUE(cluster->loop.RunOnce().ok());
  api::HeartbeatRequest up;
  up.has_launched = true;
  up.launched = {{r, 0}, {o, 0}};
  up.running = {r, o};
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, cluster->reg.node_id, up).ok());
  ASSERT_EQ(jobs.Get(a, r)->job.state, api::JobState::kRunning);

  api::HeartbeatRequest lost;
  lost.has_launched = true;
  lost.launched = {{r, 0}, {o, 0}};
  lost.finished = {{r, 137, "agent restarted", false, /*lost=*/true},
                   {o, 137, "agent restarted", false, /*lost=*/true}};
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, cluster->reg.node_id, lost).ok());
  auto restarted = jobs.Get(a, r);
  EXPECT_EQ(restarted->job.state, api::JobState::kPending);
  EXPECT_EQ(restarted->job.attempt, 1);
  EXPECT_EQ(restarted->job.reason, "agent restarted, restart 1");
  auto failed = jobs.Get(a, o);
  EXPECT_EQ(failed->job.state, api::JobState::kFailed);  // no restarts left
  EXPECT_EQ(failed->job.reason, "agent restarted");
  auto ev = jobs.Events(a, r, 0, "state", 100);
  ASSERT_GE(ev->size(), 2u);
  EXPECT_EQ((*ev)[ev->size() - 2].data["to"], "RESTARTING");
  // A repeat of the report (its reply lost) changes nothing: the attempt no longer holds the node.
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, cluster->reg.node_id, lost).ok());
  EXPECT_EQ(jobs.Get(a, r)->job.attempt, 1);
  auto listed = nodes.List(a);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  for (const auto& n : listed->nodes) {
    if (n.name == "node-r") {
      EXPECT_EQ(n.state, "UP");
    }
  }
}

TYPED_TEST_P(ServiceFlowTest, EachAttemptHasItsOwnLogs) {
  Principal a = this->MakeTenant("a");
  auto jobs = this->Jobs();
  auto cluster = this->MakeCluster(a, "node-g");
  ASSERT_TRUE(cluster);
  auto& nodes = cluster->nodes;
  const int64_t node_id = cluster->reg.node_id;
  auto sub = jobs.Submit(a, this->Spec("logs", 1, 2), "");
  ASSERT_TRUE(sub.ok());
  const int64_t id = sub->job.job.id;
  ASSERT_TRUE(cluster->loop.RunOnce().ok());
  api::HeartbeatRequest first;
  first.has_launched = true;
  first.launched = {{id, 0}};
  first.running = {id};
  first.logs = {{id, 0, 0, "first\n", 0}, {id, -1, 0, "launcher 0\n"}};  // the second: an older agent
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, node_id, first).ok());
  api::HeartbeatRequest lost;
  lost.finished = {{id, 137, "agent restarted", false, /*lost=*/true}};
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, node_id, lost).ok());
  ASSERT_EQ(jobs.Get(a, id)->job.attempt, 1);
  // Until the new attempt writes, the latest logs are the first attempt's.
  auto before = jobs.Logs(a, id);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->attempt, 0);
  ASSERT_TRUE(cluster->loop.RunOnce().ok());
  api::HeartbeatRequest second;
  second.has_launched = true;
  second.launched = {{id, 1}};
  second.running = {id};
  // Attempt 1 starts at offset 0; attempt 0's last bytes arrive late; attempt 5 is no attempt.
  second.logs = {{id, 0, 0, "second\n", 1}, {id, 0, 6, "late\n", 0}, {id, 0, 0, "bogus\n", 5}};
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, node_id, second).ok());

  auto latest = jobs.Logs(a, id);
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->attempt, 1);
  ASSERT_EQ(latest->logs.size(), 1u);
  EXPECT_EQ(latest->logs[0].bytes, 7);
  EXPECT_EQ(*service::LogFiles::Read(latest->logs[0].path, 0, 100), "second\n");
  auto old = jobs.Logs(a, id, 0);
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(old->logs.size(), 2u);  // launcher and rank 0
  EXPECT_EQ(old->logs[0].rank, -1);
  EXPECT_EQ(*service::LogFiles::Read(old->logs[1].path, 0, 100), "first\nlate\n");
  EXPECT_NE(old->logs[1].path, latest->logs[0].path);
  EXPECT_EQ(jobs.Logs(a, id, 2).status().code(), common::Code::kInvalidArgument);
  EXPECT_EQ(jobs.Logs(a, id, -1).status().code(), common::Code::kInvalidArgument);
}

TYPED_TEST_P(ServiceFlowTest, HistoryOfLongFinishedJobsIsPruned) {
  Principal a = this->MakeTenant("a");
  auto jobs = this->Jobs();
  auto cluster = this->MakeCluster(a, "node-h");
  ASSERT_TRUE(cluster);
  auto& nodes = cluster->nodes;
  const int64_t node_id = cluster->reg.node_id;
  auto old_job = jobs.Submit(a, this->Spec("old"), "");
  auto live_job = jobs.Submit(a, this->Spec("live"), "");
  ASSERT_TRUE(old_job.ok() && live_job.ok());
  const int64_t old_id = old_job->job.job.id, live = live_job->job.job.id;
  ASSERT_TRUE(cluster->loop.RunOnce().ok());
  api::HeartbeatRequest run;
  run.has_launched = true;
  run.launched = {{old_id, 0}, {live, 0}};
  run.running = {old_id, live};
  run.events = {{old_id, 0, "step", {{"step", 1}, {"loss", 0.5}}},
                {live, 0, "step", {{"step", 1}, {"loss", 0.5}}}};
  run.logs = {{old_id, 0, 0, "old\n", 0}, {live, 0, 0, "live\n", 0}};
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, node_id, run).ok());
  api::HeartbeatRequest done;
  done.running = {live};
  done.finished = {{old_id, 0, ""}};
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, node_id, done).ok());
  ASSERT_EQ(jobs.Get(a, old_id)->job.state, api::JobState::kSucceeded);
  const std::string old_log = jobs.Logs(a, old_id)->logs.at(0).path;

  const int64_t day = 86'400'000;
  service::HistoryRetention retention(this->db(), cluster->files, [this] { return this->now_.load(); },
                                      7 * day, 10);
  EXPECT_EQ(*retention.Sweep(), 0);  // finished just now
  this->now_ += 8 * day;
  ASSERT_TRUE(nodes.Heartbeat(cluster->node, node_id, done).ok());  // the live job's node stays up
  auto pruned = retention.Sweep();
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(*pruned, 1);
  EXPECT_EQ(*retention.Sweep(), 0);  // nothing left to prune
  EXPECT_TRUE(jobs.Logs(a, old_id)->logs.empty());
  EXPECT_FALSE(std::filesystem::exists(old_log));
  auto events = jobs.Events(a, old_id, 0, "", 100);
  ASSERT_TRUE(events.ok());
  ASSERT_FALSE(events->empty());
  for (const auto& e : *events) EXPECT_EQ(e.type, "state");  // how it ended stays
  EXPECT_EQ(jobs.Get(a, old_id)->job.state, api::JobState::kSucceeded);
  // A job still running keeps everything, however old.
  EXPECT_EQ(jobs.Logs(a, live)->logs.size(), 1u);
  EXPECT_EQ(jobs.Events(a, live, 0, "step", 100)->size(), 1u);
}

REGISTER_TYPED_TEST_SUITE_P(ServiceFlowTest, ListPaginatesNewestFirstWithinTenant,
                            IdempotencyKeyReturnsTheSameJob,
                            TransitionsWriteStateEventsAndRejectIllegalMoves,
                            ScheduleLaunchFinishAndNodeLoss, RunningJobPastItsTimeLimitIsCancelled,
                            PoisonedEventsKeepTheNodeUp, LaunchesAreResentUntilAcknowledged,
                            AJobTheNodeLostRestartsWhileRestartsRemain, EachAttemptHasItsOwnLogs,
                            HistoryOfLongFinishedJobsIsPruned);

}  // namespace controlplane::testing
