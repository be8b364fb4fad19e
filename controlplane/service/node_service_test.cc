// NodeService on the in-memory twin (label unit): registration with the join token issues a
// credential bound to the node; heartbeats act for that node only; events and logs for jobs not
// placed on the reporting node are dropped with nothing stored; a heartbeat that fails part-way
// stores nothing at all.
#include "controlplane/service/node_service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "api/job_event_check.h"
#include "common/crypto.h"
#include "common/time_util.h"

#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using api::JobState;
using common::Code;

class NodeServiceTest : public testing::NodeServiceFixture {
 protected:
  void SetUp() override {
    NodeServiceFixture::SetUp();
    SetUpNodeService(1000);
  }
};

TEST_F(NodeServiceTest, TheJoinTokenRegistersANodeAndItsCredentialIsBoundToIt) {
  EXPECT_EQ(nodes_->Register(member_, {"n1", "127.0.0.1", "", 2, 0, {}, {}}).status().code(),
            Code::kPermissionDenied);
  int64_t n1 = 0, n2 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const Principal cred2 = AddNode(*nodes_, join_, "n2", 2, &n2);
  EXPECT_EQ(cred1.role, "node");
  EXPECT_EQ(cred1.node_id, n1);
  EXPECT_NE(n1, n2);
  // Its own credential re-registers it, keeping id and credential; no other node's does.
  auto again = nodes_->Register(cred1, {"n1", "127.0.0.2", "", 4, 0, {}, {}});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->node_id, n1);
  EXPECT_TRUE(again->node_token.empty());
  EXPECT_EQ(nodes_->Register(cred2, {"n1", "127.0.0.1", "", 2, 0, {}, {}}).status().code(),
            Code::kPermissionDenied);
  // The join token cannot take the name of a live node.
  EXPECT_EQ(nodes_->Register(join_, {"n1", "127.0.0.1", "", 2, 0, {}, {}}).status().code(),
            Code::kAlreadyExists);
  auto list = nodes_->List(member_);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->nodes.at(0).cpu_slots, 4);
  EXPECT_EQ(list->nodes.at(0).address, "127.0.0.2");
}

// The join token, on every node, cannot take a registered name, UP or DOWN: a node that went
// DOWN keeps its identity for its own agent (its credential), and only a cluster-admin's reset
// gives the name to another agent, revoking the old credential.
TEST_F(NodeServiceTest, TheJoinTokenTakesANameOnlyAfterAnOperatorReset) {
  int64_t n1 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  {
    auto uow = Begin();
    ASSERT_TRUE(uow->nodes().SetState(n1, "DOWN").ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto taken = nodes_->Register(join_, {"n1", "127.0.0.9", "", 2, 0, {}, {}});
  EXPECT_EQ(taken.status().code(), Code::kAlreadyExists);
  EXPECT_NE(taken.status().message().find("embody nodes reset n1"), std::string::npos)
      << taken.status().message();
  // Its own agent comes back with its credential.
  EXPECT_TRUE(nodes_->Register(cred1, {"n1", "127.0.0.1", "", 2, 0, {}, {}}).ok());
  // A member or the node itself cannot reset; a cluster-admin can.
  const Principal admin = AddPerson(a_, "cluster-admin");
  EXPECT_EQ(nodes_->Reset(member_, n1).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(nodes_->Reset(cred1, n1).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(nodes_->Reset(admin, n1 + 100).status().code(), Code::kNotFound);
  ASSERT_TRUE(nodes_->Reset(admin, n1).ok());
  auto again = nodes_->Register(join_, {"n1", "127.0.0.9", "", 2, 0, {}, {}});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->node_id, n1);
  EXPECT_FALSE(again->node_token.empty());
}

// A node heard again after its job moved on runs a stale attempt: the reply tells it to stop
// that job, and only that one.
TEST_F(NodeServiceTest, AJobRunningWhereItHoldsNoSlotIsToldToStop) {
  int64_t n1 = 0, n2 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  AddNode(*nodes_, join_, "n2", 2, &n2);
  const int64_t here = PlacedJob(member_, n1);
  const int64_t moved = PlacedJob(member_, n2);  // placed elsewhere, as after a requeue
  api::HeartbeatRequest req;
  req.running = {here, moved};
  auto reply = nodes_->Heartbeat(cred1, n1, req);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  std::vector<int64_t> killed;
  for (const api::Command& c : reply->commands) {
    if (c.type == api::Command::Type::kKill) killed.push_back(c.job_id);
  }
  EXPECT_EQ(killed, (std::vector<int64_t>{moved}));
}

// Requeued while its node was cut off, then placed on that node again: the node still runs the
// earlier attempt. The reply tells it to stop that attempt, and its end, reported with its
// attempt, does not end the new one.
TEST_F(NodeServiceTest, AnEarlierAttemptOnTheNodeTheJobIsPlacedOnAgainIsStoppedAndItsEndIgnored) {
  int64_t n1 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t job = PlacedJob(member_, n1);
  {
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(job, std::nullopt, true);
    j.attempt = 1;  // restarted after its node was lost, and placed here again
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  api::HeartbeatRequest req;
  req.running = {job};
  req.has_launched = true;
  req.launched = {{job, 0}};
  auto reply = nodes_->Heartbeat(cred1, n1, req);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  int kills = 0, launches = 0;
  for (const api::Command& c : reply->commands) {
    kills += c.type == api::Command::Type::kKill && c.job_id == job;
    launches += c.type == api::Command::Type::kLaunch && c.job_id == job && c.attempt == 1;
  }
  EXPECT_EQ(kills, 1);
  EXPECT_EQ(launches, 1);  // the new attempt's launch stands, for when the old one is gone
  EXPECT_EQ(JobRow(job).state, JobState::kScheduled);  // attempt 0 running is not attempt 1's

  // The old attempt ends (killed): nothing changes for attempt 1.
  api::HeartbeatRequest ended;
  ended.has_launched = true;
  ended.launched = {{job, 0}};
  api::FinishedJob f{job, 137, "killed by signal 9"};
  f.attempt = 0;
  ended.finished = {f};
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, ended).ok());
  EXPECT_EQ(JobRow(job).state, JobState::kScheduled);
  EXPECT_EQ(JobRow(job).attempt, 1);

  // The new attempt runs and ends: that end counts.
  api::HeartbeatRequest second;
  second.running = {job};
  second.has_launched = true;
  second.launched = {{job, 1}};
  reply = nodes_->Heartbeat(cred1, n1, second);
  ASSERT_TRUE(reply.ok());
  for (const api::Command& c : reply->commands) EXPECT_NE(c.type, api::Command::Type::kKill);
  EXPECT_EQ(JobRow(job).state, JobState::kRunning);
  api::FinishedJob done{job, 0, "exited with code 0"};
  done.attempt = 1;
  done.killed = false;
  second.running.clear();
  second.finished = {done};
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, second).ok());
  EXPECT_EQ(JobRow(job).state, JobState::kSucceeded);
}

// Where a launch's time went: the server's own moments (placed, handed out, exit stored) and the
// head agent's durations since it got the launch, as consecutive phases that add up to the time
// from submission to the stored end, without comparing the agent's clock with the server's. A
// job cannot write these records itself.
TEST_F(NodeServiceTest, AFinishedJobKeepsWhereItsLaunchSpentItsTime) {
  std::vector<LaunchPhases> observed;
  nodes_ = std::make_unique<NodeService>(
      db_, *files_, 1000, clock(), nullptr,
      NodeServiceHooks{.on_launch_phases = [&](const LaunchPhases& p) { observed.push_back(p); }});
  int64_t n1 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t t0 = now_.load();
  const int64_t job = PlacedJob(member_, n1);
  {
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(job, std::nullopt, true);
    j.updated_ms = t0 + 40;  // placed 40 ms after its submission (the SCHEDULED transition)
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto jobs = Jobs();
  auto view = [&] { return ToJson(*jobs.Get(member_, job))["launch_phases"]; };
  EXPECT_TRUE(view().is_null());  // never handed out: nothing to say yet
  now_ = t0 + 140;
  auto reply = nodes_->Heartbeat(cred1, n1, {});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->commands.size(), 1u);
  now_ = t0 + 190;  // a repeat, not acknowledged yet, is not another hand-out
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, {}).ok());
  EXPECT_EQ(EventsOf(job, kLaunchSentEvent).size(), 1u);
  now_ = t0 + 210;
  api::HeartbeatRequest running;
  running.running = {job};
  running.has_launched = true;
  running.launched = {{job, 0}};
  // The job's own event of a reserved type is dropped.
  running.events.push_back({job, 0, kLaunchPhasesEvent, {{"attempt", 0}}});
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, running).ok());
  EXPECT_TRUE(EventsOf(job, kLaunchPhasesEvent).empty());
  nlohmann::json partial = view();
  EXPECT_EQ(partial["node"], "n1");
  EXPECT_EQ(partial["running_at"], common::FormatTimeMillis(t0 + 210));
  EXPECT_TRUE(partial["exit_stored_at"].is_null());
  EXPECT_EQ(partial["phases"], nlohmann::json::parse(
                                   R"([{"phase":"queued","ms":40},{"phase":"dispatch","ms":100}])"));

  now_ = t0 + 710;
  api::HeartbeatRequest ended;
  ended.has_launched = true;
  ended.launched = {{job, 0}};
  api::FinishedJob f{job, 0, "exited with code 0"};
  f.attempt = 0;
  f.killed = false;
  f.timings = {10, 25, 400, 410, 415};  // the agent's milliseconds since it got the launch
  ended.finished = {f};
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, ended).ok());
  EXPECT_EQ(JobRow(job).state, JobState::kSucceeded);
  nlohmann::json p = view();
  EXPECT_EQ(p["attempt"], 0);
  EXPECT_EQ(p["placed_at"], common::FormatTimeMillis(t0 + 40));
  EXPECT_EQ(p["launch_sent_at"], common::FormatTimeMillis(t0 + 140));
  EXPECT_EQ(p["exit_stored_at"], common::FormatTimeMillis(t0 + 710));
  EXPECT_EQ(p["agent_ms"]["exited"], 400);
  // transit: 710 - 140 on the server's clock, less the 415 the node accounts for.
  EXPECT_EQ(p["phases"], nlohmann::json::parse(R"([
      {"phase":"queued","ms":40}, {"phase":"dispatch","ms":100}, {"phase":"sandbox","ms":10},
      {"phase":"spawn","ms":15}, {"phase":"run","ms":375}, {"phase":"cleanup","ms":10},
      {"phase":"report","ms":5}, {"phase":"transit","ms":155}])"));
  EXPECT_EQ(p["total_ms"], 710);
  ASSERT_EQ(observed.size(), 1u);
  EXPECT_EQ(PhaseDurations(observed[0]).size(), 8u);
  // The end is reported again (the reply was lost): nothing is recorded twice.
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, ended).ok());
  EXPECT_EQ(EventsOf(job, kLaunchPhasesEvent).size(), 1u);
  EXPECT_EQ(observed.size(), 1u);
}

// A job's view says how long it waited for its start: started_at - created_at in seconds once
// the server heard it running, null before (a job still pending, one placed but not running).
TEST_F(NodeServiceTest, AJobsViewSaysHowLongItWaitedForItsStart) {
  int64_t n1 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t t0 = now_.load();
  const int64_t job = PlacedJob(member_, n1);
  auto jobs = Jobs();
  const int64_t pending = jobs.Submit(member_, Spec("pending"), "")->job.job.id;
  auto wait = [&](int64_t id) { return ToJson(*jobs.Get(member_, id))["wait_seconds"]; };
  EXPECT_TRUE(wait(job).is_null());
  EXPECT_TRUE(wait(pending).is_null());
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, {}).ok());  // the launch handed out
  now_ = t0 + 2'345;
  api::HeartbeatRequest running;
  running.running = {job};
  running.has_launched = true;
  running.launched = {{job, 0}};
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, running).ok());
  const JobRecord row = JobRow(job);
  ASSERT_EQ(row.state, JobState::kRunning);
  ASSERT_TRUE(row.started_ms.has_value());
  EXPECT_EQ(row.created_ms, t0);
  EXPECT_EQ(*row.started_ms, t0 + 2'345);
  EXPECT_EQ(wait(job), 2.345);
  EXPECT_EQ(JobOf(*jobs.Get(member_, job)).wait_seconds, 2.345);
  EXPECT_TRUE(wait(pending).is_null());
  EXPECT_EQ(JobOf(*jobs.Get(member_, pending)).wait_seconds, std::nullopt);
}

TEST_F(NodeServiceTest, AHeartbeatActsForItsOwnNodeOnly) {
  int64_t n1 = 0, n2 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  AddNode(*nodes_, join_, "n2", 2, &n2);
  EXPECT_EQ(nodes_->Heartbeat(join_, n1, {}).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(nodes_->Heartbeat(member_, n1, {}).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(nodes_->Heartbeat(cred1, n2, {}).status().code(), Code::kPermissionDenied);
  now_ += 500;
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, {}).ok());
  auto uow = Begin();
  EXPECT_EQ((**uow->nodes().Get(n1)).last_heartbeat_ms, now_.load());
  EXPECT_EQ((**uow->nodes().Get(n2)).last_heartbeat_ms, now_.load() - 500);
}

TEST_F(NodeServiceTest, EventsAndLogsOfJobsNotOnTheNodeAreDroppedAndNothingIsStored) {
  int64_t n1 = 0, n2 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const Principal cred2 = AddNode(*nodes_, join_, "n2", 2, &n2);
  const int64_t job = PlacedJob(member_, n1);
  const size_t before = EventsOf(job).size();
  api::HeartbeatRequest forged;
  forged.running = {job};
  forged.finished = {{job, 0, ""}};
  forged.events = {{job, 0, "step", {{"step", 1}, {"loss", 0.1}}},
                   {job, 0, "checkpoint", {{"step", 1}, {"path", "/evil"}, {"bytes", 1}}},
                   {job + 100, 0, "note", {{"x", 1}}}};
  forged.logs = {{job, 0, 0, "forged\n"}, {job + 100, 0, 0, "none\n"}};
  ASSERT_TRUE(nodes_->Heartbeat(cred2, n2, forged).ok());
  EXPECT_EQ(EventsOf(job).size(), before);
  EXPECT_EQ(JobRow(job).state, JobState::kScheduled);  // neither running nor finished
  {
    auto uow = Begin();
    EXPECT_TRUE(uow->logs().ForJob(job)->empty());
    EXPECT_FALSE(uow->events().LatestCheckpoint(job)->has_value());
  }
  EXPECT_FALSE(std::filesystem::exists(files_->PathFor(job, 0, 0)));

  // The same reports from the node it runs on are kept.
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, forged).ok());
  EXPECT_EQ(EventsOf(job, "step").size(), 1u);
  EXPECT_EQ(JobRow(job).state, JobState::kSucceeded);
  auto uow = Begin();
  EXPECT_EQ(uow->logs().ForJob(job)->size(), 1u);
  EXPECT_EQ((**uow->events().LatestCheckpoint(job)).path, "/evil");
}

TEST_F(NodeServiceTest, AHeartbeatThatFailsPartWayStoresNothing) {
  int64_t n1 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t job = PlacedJob(member_, n1);
  const size_t before = EventsOf(job).size();
  const int64_t seen = now_.load();
  now_ += 700;
  // The job's log directory cannot be made (a file is in its place): the log bytes fail after
  // the events were written.
  const std::string log = files_->PathFor(job, 0, 0);
  const std::string log_dir = log.substr(0, log.rfind('/'));
  std::filesystem::create_directories(std::filesystem::path(log_dir).parent_path());
  { std::ofstream(log_dir) << "in the way"; }
  api::HeartbeatRequest bad;
  bad.running = {job};
  bad.events = {{job, 0, "note", {{"type", "note"}, {"ok", true}}}};
  bad.logs = {{job, 0, 0, "line\n"}};
  EXPECT_EQ(nodes_->Heartbeat(cred1, n1, bad).status().code(), Code::kInternal);
  EXPECT_EQ(EventsOf(job).size(), before);  // not even the event
  EXPECT_EQ(JobRow(job).state, JobState::kScheduled);
  auto uow = Begin();
  EXPECT_EQ((**uow->nodes().Get(n1)).last_heartbeat_ms, seen);  // the touch is undone too
  uow.reset();
  api::HeartbeatRequest oversized;
  oversized.logs = {{job, 0, 0, std::string(4 * 1024 * 1024 + 1, 'x')}};
  EXPECT_EQ(nodes_->Heartbeat(cred1, n1, oversized).status().code(), Code::kInvalidArgument);
}

// One job's bad events cannot fail its node's heartbeats: each is dropped alone, with a reason
// counted, and everything else in the heartbeat is stored.
TEST_F(NodeServiceTest, PoisonedEventsAreDroppedAloneAndTheHeartbeatSucceeds) {
  int64_t n1 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const int64_t job = PlacedJob(member_, n1);
  const size_t notes_before = EventsOf(job, "note").size();
  now_ += 700;
  api::HeartbeatRequest hb;
  hb.running = {job};
  hb.events = {
      {job, 0, "note", {{"type", "note"}, {"ok", 1}}},
      {job, 0, "note", {{"type", "note"}, {"text", std::string("nul\0inside", 10)}}},
      {job, 0, "checkpoint", {{"type", "checkpoint"}, {"step", 1}, {"path", "/c"}, {"bytes", "9"}}},
      {job, 0, "note", {{"type", "note"}, {"blob", std::string(api::kMaxEventBytes, 'x')}}},
      {job, 0, std::string(65, 't'), {{"x", 1}}},
      {job, 0, "step", {{"type", "step"}, {"step", 4}, {"loss", 0.5}}}};
  hb.finished = {};
  hb.logs = {{job, 0, 0, "line\n"}};
  auto reply = nodes_->Heartbeat(cred1, n1, hb);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(EventsOf(job, "note").size(), notes_before + 1);
  EXPECT_EQ(EventsOf(job, "step").size(), 1u);
  EXPECT_EQ(JobRow(job).state, JobState::kRunning);
  auto uow = Begin();
  EXPECT_EQ((**uow->nodes().Get(n1)).last_heartbeat_ms, now_.load());
  EXPECT_EQ(uow->logs().ForJob(job)->size(), 1u);
  EXPECT_FALSE(uow->events().LatestCheckpoint(job)->has_value());
  uow.reset();
  const auto dropped = nodes_->EventsDropped();
  EXPECT_EQ(dropped.at("bad_text"), 1u);
  EXPECT_EQ(dropped.at("bad_field"), 1u);
  EXPECT_EQ(dropped.at("too_large"), 1u);
  EXPECT_EQ(dropped.at("bad_type"), 1u);

  // A finished job's reason is the agent's text: stored with what PostgreSQL cannot hold replaced.
  api::HeartbeatRequest done;
  done.finished = {{job, 1, std::string("bad\0reason", 10) + std::string(5000, 'r')}};
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, done).ok());
  EXPECT_EQ(JobRow(job).state, JobState::kFailed);
  EXPECT_EQ(JobRow(job).reason.substr(0, 10), "bad\xEF\xBF\xBDreas");
  EXPECT_LE(JobRow(job).reason.size(), 1024u);
}

TEST_F(NodeServiceTest, DrainingIsForClusterAdmins) {
  int64_t n1 = 0;
  AddNode(*nodes_, join_, "n1", 2, &n1);
  EXPECT_EQ(nodes_->SetDraining(member_, n1, true).status().code(), Code::kPermissionDenied);
  const Principal root = AddPerson(a_, "cluster-admin");
  auto drained = nodes_->SetDraining(root, n1, true);
  ASSERT_TRUE(drained.ok());
  EXPECT_TRUE(drained->draining);
  EXPECT_EQ(nodes_->SetDraining(root, n1 + 100, true).status().code(), Code::kNotFound);
}

// A job on two nodes whose head reports it failed: the end waits (HeartbeatResponse::deferred)
// until the other node has been heard since, so that a node lost under the job, whose loss the
// head's launcher saw first, restarts it rather than failing it. A peer heard again makes it a
// failure; one silent past the bound (6 intervals) does too; a success never waits.
TEST_F(NodeServiceTest, AMultiNodeFailureWaitsUntilTheOtherNodeIsHeardAgain) {
  int64_t n1 = 0, n2 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const Principal cred2 = AddNode(*nodes_, join_, "n2", 2, &n2);
  auto jobs = Jobs();
  auto place = [&](const std::string& name) {
    auto sub = jobs.Submit(member_, Spec(name), "");
    EXPECT_TRUE(sub.ok()) << sub.status().ToString();
    const int64_t id = sub->job.job.id;
    auto uow = Begin();
    EXPECT_TRUE(uow->allocations().Insert({id, n1, "", "", 1, 1, "cpu", true, true, 0, "t"}).ok());
    EXPECT_TRUE(uow->allocations().Insert({id, n2, "", "", 1, 1, "cpu", false, false, 0, "t"}).ok());
    JobRecord j = **uow->jobs().Get(id, std::nullopt, true);
    j.state = JobState::kRunning;
    EXPECT_TRUE(uow->jobs().Update(j).ok());
    EXPECT_TRUE(uow->Commit().ok());
    return id;
  };
  auto ended = [&](int64_t id, int code) {
    api::HeartbeatRequest req;
    api::FinishedJob f;
    f.job_id = id;
    f.exit_code = code;
    f.killed = false;
    f.attempt = 0;
    req.finished.push_back(f);
    return req;
  };
  auto state = [&](int64_t id) {
    auto uow = Begin();
    return (*uow->jobs().Get(id, std::nullopt, false))->state;
  };

  // Heard again: the failure is taken at the head's next report.
  const int64_t failed = place("failed");
  ASSERT_TRUE(nodes_->Heartbeat(cred2, n2, {}).ok());
  now_ += 10;
  auto first = nodes_->Heartbeat(cred1, n1, ended(failed, 255));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->deferred, std::vector<int64_t>{failed});
  EXPECT_EQ(state(failed), JobState::kRunning);
  now_ += 400;
  auto again = nodes_->Heartbeat(cred1, n1, ended(failed, 255));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->deferred, std::vector<int64_t>{failed}) << "n2 not heard since";
  ASSERT_TRUE(nodes_->Heartbeat(cred2, n2, {}).ok());
  now_ += 100;
  auto taken = nodes_->Heartbeat(cred1, n1, ended(failed, 255));
  ASSERT_TRUE(taken.ok());
  EXPECT_TRUE(taken->deferred.empty());
  EXPECT_EQ(state(failed), JobState::kFailed);

  // A success is taken at once.
  const int64_t done = place("done");
  auto ok = nodes_->Heartbeat(cred1, n1, ended(done, 0));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->deferred.empty());
  EXPECT_EQ(state(done), JobState::kSucceeded);

  // Silent past the bound (the node-down rule would have acted long before): taken as reported.
  const int64_t silent = place("silent");
  now_ += 10;
  auto held = nodes_->Heartbeat(cred1, n1, ended(silent, 1));
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->deferred, std::vector<int64_t>{silent});
  now_ += 6 * 1000 + 1;
  auto late = nodes_->Heartbeat(cred1, n1, ended(silent, 1));
  ASSERT_TRUE(late.ok());
  EXPECT_TRUE(late->deferred.empty());
  EXPECT_EQ(state(silent), JobState::kFailed);
}

// A job on two nodes: the head's launch carries the attempt's job token and every node's agent
// URL; the other node gets a worker command with the token's digest only, while the job lives.
TEST_F(NodeServiceTest, AMultiNodeJobGivesTheHeadTheTokenAndTheOtherNodeItsDigest) {
  int64_t n1 = 0, n2 = 0;
  const Principal cred1 = AddNode(*nodes_, join_, "n1", 2, &n1);
  const Principal cred2 = AddNode(*nodes_, join_, "n2", 2, &n2);
  auto jobs = Jobs();
  auto sub = jobs.Submit(member_, Spec("two"), "");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const int64_t id = sub->job.job.id;
  {
    auto uow = Begin();
    ASSERT_TRUE(uow->allocations().Insert({id, n1, "", "", 1, 1, "cpu", true, false, 0, "t0k"}).ok());
    ASSERT_TRUE(uow->allocations().Insert({id, n2, "", "", 1, 1, "cpu", false, false, 0, "t0k"}).ok());
    JobRecord j = **uow->jobs().Get(id, std::nullopt, true);
    j.state = JobState::kScheduled;
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  auto head = nodes_->Heartbeat(cred1, n1, {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  ASSERT_EQ(head->commands.size(), 1u);
  const api::Command& launch = head->commands[0];
  EXPECT_EQ(launch.type, api::Command::Type::kLaunch);
  EXPECT_EQ(launch.job_token, "t0k");
  ASSERT_EQ(launch.hosts.size(), 2u);
  EXPECT_EQ(launch.hosts[0].agent_url, "http://n1");
  EXPECT_EQ(launch.hosts[1].agent_url, "http://n2");

  auto other = nodes_->Heartbeat(cred2, n2, {});
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_EQ(other->commands.size(), 1u);
  const api::Command& worker = other->commands[0];
  EXPECT_EQ(worker.type, api::Command::Type::kWorker);
  EXPECT_EQ(worker.job_id, id);
  EXPECT_EQ(worker.tenant_id, a_);
  EXPECT_EQ(worker.job_token_sha256, common::Sha256Hex("t0k"));
  EXPECT_TRUE(worker.job_token.empty());
  EXPECT_EQ(worker.spec["name"], "two");
  EXPECT_FALSE(worker.held);
  // Every node of the job, the head first: what its processes there may reach.
  EXPECT_EQ(worker.peers,
            (std::vector<std::string>{launch.hosts[0].address, launch.hosts[1].address}));
  EXPECT_FALSE(launch.hosts[0].address.empty());

  // Once the agent lists the assignment as held, it comes short: the job and attempt only.
  api::HeartbeatRequest holding;
  holding.has_workers = true;
  holding.workers = {{id, worker.attempt}};
  auto short_form = nodes_->Heartbeat(cred2, n2, holding);
  ASSERT_TRUE(short_form.ok());
  ASSERT_EQ(short_form->commands.size(), 1u);
  EXPECT_TRUE(short_form->commands[0].held);
  EXPECT_EQ(short_form->commands[0].job_id, id);
  EXPECT_TRUE(short_form->commands[0].spec.is_null());
  EXPECT_TRUE(short_form->commands[0].job_token_sha256.empty());
  // An idle heartbeat whose reply holds nothing new is held like one with no commands.
  NodeWaiters waiters(4);
  NodeService holds(db_, *files_, 1000, clock(), nullptr, {.waiters = &waiters});
  holding.wait_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(holds.Heartbeat(cred2, n2, holding).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  holding.wait_ms = 0;
  // Another attempt than the one held: in full again.
  holding.workers = {{id, worker.attempt + 1}};
  auto full = nodes_->Heartbeat(cred2, n2, holding);
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->commands.size(), 1u);
  EXPECT_FALSE(full->commands[0].held);
  EXPECT_EQ(full->commands[0].job_token_sha256, common::Sha256Hex("t0k"));

  // Once the head reports it ended, the other node is told nothing more about it.
  api::HeartbeatRequest done;
  done.finished.push_back({id, 0, "exited with code 0", false});
  ASSERT_TRUE(nodes_->Heartbeat(cred1, n1, done).ok());
  auto after = nodes_->Heartbeat(cred2, n2, {});
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->commands.empty());
}

}  // namespace
}  // namespace controlplane::service
