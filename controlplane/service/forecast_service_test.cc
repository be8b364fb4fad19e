// Forecasts on the in-memory twin (label unit): a dry run stores nothing and is refused exactly
// as the submission would be; predicted starts on an idle cluster, behind a running job, and
// around a reservation with backfill; a job's forecast (another tenant's: not found); and the
// forecast recorded for a submitted job, compared with when it started and ended.
#include "controlplane/service/forecast_service.h"

#include <gtest/gtest.h>

#include "common/time_util.h"
#include "controlplane/service/scheduler_loop.h"
#include "controlplane/testing/memory_service_fixture.h"

namespace controlplane::service {
namespace {

using api::JobState;
using nlohmann::json;

// A forecast as the API writes it: these tests check the fields of the wire.
Result<json> Wire(const Result<api::v1::Forecast>& f) {
  if (!f.ok()) return f.status();
  return api::v1::ToJson(*f);
}

class ForecastServiceTest : public testing::MemoryServiceTest {
 protected:
  void SetUp() override {
    MemoryServiceTest::SetUp();
    a_ = AddTenant("a", quota_);
    b_ = AddTenant("b");
    member_ = AddPerson(a_, "member");
    other_ = AddPerson(b_, "member");
  }

  ForecastService Forecasts() {
    return ForecastService(db_, api::SpecLimits{}, clock(), ForecastServiceOptions{});
  }

  // An UP node of `cpu` slots.
  int64_t Node(const std::string& name, int cpu) { return ParkNode(name, cpu, false); }

  static std::string Limited(const std::string& name, int nodes, int ranks, int64_t limit_s) {
    return Spec(name, nodes, ranks, ",\"time_limit_seconds\":" + std::to_string(limit_s));
  }

  int64_t Submit(const std::string& spec) {
    auto r = Jobs().Submit(member_, spec, "");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->job.job.id : 0;
  }

  // Rows of every table a submission writes, and the tenant's pending count.
  struct Counts {
    int64_t jobs = 0, events = 0, audit = 0, forecasts = 0, pending = 0;
    bool operator==(const Counts&) const = default;
  };
  Counts Count() {
    Counts c;
    auto uow = Begin();
    JobQuery q;
    q.limit = 1000;
    auto jobs = *uow->jobs().List(q);
    c.jobs = static_cast<int64_t>(jobs.size());
    std::vector<int64_t> ids;
    for (const JobRecord& j : jobs) {
      c.events += static_cast<int64_t>(uow->events().List(j.id, 0, "", 1000)->size());
      ids.push_back(j.id);
    }
    AuditQuery aq;
    aq.limit = 1000;
    c.audit = static_cast<int64_t>(uow->audit().List(aq)->size());
    c.forecasts = static_cast<int64_t>(uow->forecasts().ForJobs(ids)->size());
    c.pending = uow->tenants().UsageNow(a_)->pending_jobs;
    return c;
  }

  int64_t Ms(const json& time) {
    EXPECT_TRUE(time.is_string()) << time;
    if (!time.is_string()) return 0;
    auto ms = common::ParseUtcTime(time.get<std::string>());
    EXPECT_TRUE(ms.has_value()) << time;
    return ms.value_or(0);
  }

  Quota quota_;
  int64_t a_ = 0, b_ = 0;
  Principal member_, other_;
};

TEST_F(ForecastServiceTest, ADryRunStoresNothing) {
  Node("n1", 2);
  PlacedJob(member_, Node("n2", 2), Limited("running", 1, 2, 600), 2);
  Submit(Spec("waiting", 1, 2));
  const Counts before = Count();
  auto f = Wire(Forecasts().DryRun(member_, Limited("dry", 1, 1, 60)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["admitted"], true);
  EXPECT_EQ((*f)["dry_run"], true);
  EXPECT_EQ(Count(), before);
}

TEST_F(ForecastServiceTest, ARefusalIsTheSubmissionsOwn) {
  Node("n1", 4);
  const Principal viewer = AddPerson(a_, "viewer");
  const std::vector<std::pair<Principal, std::string>> cases = {
      {member_, "{not json"},
      {member_, Spec("zero", 0)},
      {member_, Spec("huge", 1, 64)},                       // never fits: 422
      {member_, Spec("vip", 1, 1, ",\"priority\":1000")},   // above the default max: 403
      {member_, Spec("vip", 1, 1, ",\"priority\":101")},    // above the default max: 403
      {viewer, Spec("reader")},                             // viewers do not submit
      {member_, R"({"name":"imp","kind":"import","command":["true"]})"},
      {member_, Spec("ckpt", 1, 1, ",\"init_from\":999")},  // no such checkpoint
  };
  auto jobs = Jobs();
  auto forecasts = Forecasts();
  for (const auto& [who, body] : cases) {
    auto submitted = jobs.Submit(who, body, "");
    auto dry = Wire(forecasts.DryRun(who, body));
    ASSERT_FALSE(submitted.ok()) << body;
    ASSERT_FALSE(dry.ok()) << body;
    EXPECT_EQ(dry.status().code(), submitted.status().code()) << body;
    EXPECT_EQ(dry.status().message(), submitted.status().message()) << body;
    EXPECT_EQ(dry.status().field(), submitted.status().field()) << body;
  }
}

TEST_F(ForecastServiceTest, APendingQuotaRefusesTheDryRunAsTheSubmission) {
  quota_.pending_jobs = 1;
  auto uow = Begin();
  TenantRecord t = **uow->tenants().GetTenant(a_, true);
  t.quota.pending_jobs = 1;
  ASSERT_TRUE(uow->tenants().UpdateTenant(t, now_.load()).ok());
  ASSERT_TRUE(uow->Commit().ok());
  ParkNode("parked", 4);  // admits, places nothing
  Submit(Spec("first"));
  auto submitted = Jobs().Submit(member_, Spec("second"), "");
  auto dry = Wire(Forecasts().DryRun(member_, Spec("second")));
  ASSERT_FALSE(submitted.ok());
  ASSERT_FALSE(dry.ok());
  EXPECT_EQ(submitted.status().code(), common::Code::kResourceExhausted);
  EXPECT_EQ(dry.status().ToString(), submitted.status().ToString());
}

// Before any hand-over has been seen, a job placed at an expected end starts the prior after
// it (the server's heartbeat interval); with the hand-over term off, at the end itself.
TEST_F(ForecastServiceTest, BeforeHandOversAreLearnedThePriorDelaysAJobBehindAnEnd) {
  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  ForecastServiceOptions prior;
  prior.hand_over_prior_ms = 1000;
  ForecastServiceOptions off = prior;
  off.learn_hand_over = false;
  ForecastService with(db_, api::SpecLimits{}, clock(), prior);
  ForecastService without(db_, api::SpecLimits{}, clock(), off);
  auto a = Wire(with.DryRun(member_, Limited("next", 1, 2, 60)));
  auto b = Wire(without.DryRun(member_, Limited("next", 1, 2, 60)));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Ms((*a)["predicted_start"]), now_.load() + 601'000);
  EXPECT_EQ((*a)["hand_over_seconds"], 1.0);
  EXPECT_EQ(Ms((*b)["predicted_start"]), now_.load() + 600'000);
  EXPECT_EQ((*b)["hand_over_seconds"], 0.0);
}

TEST_F(ForecastServiceTest, OnAnIdleClusterItStartsNow) {
  const int64_t n1 = Node("n1", 4);
  auto f = Wire(Forecasts().DryRun(member_, Limited("now", 1, 2, 120)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["starts_now"], true);
  EXPECT_EQ(Ms((*f)["predicted_start"]), now_.load());
  EXPECT_EQ((*f)["predicted_wait_seconds"], 0.0);
  EXPECT_EQ((*f)["predicted_run_seconds"], 120.0);
  EXPECT_EQ((*f)["run_time_source"], "time_limit");
  EXPECT_EQ(Ms((*f)["predicted_end"]), now_.load() + 120'000);
  ASSERT_EQ((*f)["placement"]["nodes"].size(), 1u);
  EXPECT_EQ((*f)["placement"]["nodes"][0]["node_id"], n1);
  EXPECT_EQ((*f)["placement"]["nodes"][0]["node"], "n1");
  EXPECT_EQ((*f)["placement"]["nodes"][0]["ranks"], 2);
  EXPECT_TRUE((*f)["reasons"].empty()) << (*f)["reasons"];
}

TEST_F(ForecastServiceTest, BehindARunningJobItStartsAtThatJobsEnd) {
  const int64_t n1 = Node("n1", 2);
  const int64_t running = PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  auto f = Wire(Forecasts().DryRun(member_, Spec("next", 1, 2)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["starts_now"], false);
  EXPECT_EQ(Ms((*f)["predicted_start"]), now_.load() + 600'000);
  EXPECT_EQ((*f)["predicted_wait_seconds"], 600.0);
  // No time limit and no planner: no run time, said so.
  EXPECT_TRUE((*f)["predicted_run_seconds"].is_null());
  EXPECT_TRUE((*f)["predicted_end"].is_null());
  const std::string reasons = (*f)["reasons"].dump();
  EXPECT_NE(reasons.find("waiting for 1 nodes with 2 free cpu slots each (0 fit"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("starts when job " + std::to_string(running) + " ends"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("run time unknown"), std::string::npos) << reasons;
}

TEST_F(ForecastServiceTest, AJobWithoutATimeLimitAheadLeavesTheStartUnknown) {
  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Spec("forever", 1, 2), 2);
  auto f = Wire(Forecasts().DryRun(member_, Spec("next", 1, 2)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE((*f)["predicted_start"].is_null());
  EXPECT_NE((*f)["reasons"].dump().find("neither a time limit nor a predicted run time"),
            std::string::npos)
      << (*f)["reasons"];
}

// Two nodes of 2 slots: n1 full until +600 s, n2 half full until +1200 s; a gang of both whole
// nodes waits, reserved from +1200 s. A short job backfills now on n2's free slot; a long one
// cannot without delaying the gang, so it starts when the gang, started at +1200 s for its
// 100 s, ends.
TEST_F(ForecastServiceTest, AroundAReservationShortJobsBackfillAndLongOnesWait) {
  const int64_t n1 = Node("n1", 2);
  const int64_t n2 = Node("n2", 2);
  PlacedJob(member_, n1, Limited("r1", 1, 2, 600), 2);
  PlacedJob(member_, n2, Limited("r2", 1, 1, 1200), 1);
  const int64_t gang = Submit(Limited("gang", 2, 2, 100));
  auto forecasts = Forecasts();

  auto shorter = Wire(forecasts.DryRun(member_, Limited("short", 1, 1, 300)));
  ASSERT_TRUE(shorter.ok()) << shorter.status().ToString();
  EXPECT_EQ((*shorter)["starts_now"], true);
  EXPECT_EQ((*shorter)["placement"]["nodes"][0]["node_id"], n2);

  auto longer = Wire(forecasts.DryRun(member_, Limited("long", 1, 1, 3000)));
  ASSERT_TRUE(longer.ok()) << longer.status().ToString();
  EXPECT_EQ((*longer)["starts_now"], false);
  EXPECT_EQ(Ms((*longer)["predicted_start"]), now_.load() + 1'300'000);
  EXPECT_EQ((*longer)["jobs_ahead"], 1);
  const std::string reasons = (*longer)["reasons"].dump();
  EXPECT_NE(reasons.find("reservation for job " + std::to_string(gang) + " on 2 nodes from " +
                         common::FormatTimeMillis(now_.load() + 1'200'000)),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("would run into the start of reserved jobs"), std::string::npos)
      << reasons;

  // The gang's own forecast: its reservation's start.
  auto g = Wire(forecasts.ForJob(member_, gang));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)["state"], "PENDING");
  EXPECT_EQ(Ms((*g)["predicted_start"]), now_.load() + 1'200'000);
  EXPECT_EQ(Ms((*g)["predicted_end"]), now_.load() + 1'300'000);
}

TEST_F(ForecastServiceTest, AJobsForecastIsItsTenantsOnlyAndARunningJobGetsItsEnd) {
  const int64_t n1 = Node("n1", 2);
  const int64_t running = PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  auto forecasts = Forecasts();
  auto theirs = Wire(forecasts.ForJob(other_, running));
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.status().code(), common::Code::kNotFound);
  auto mine = Wire(forecasts.ForJob(member_, running));
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ((*mine)["state"], "SCHEDULED");
  EXPECT_EQ(Ms((*mine)["predicted_end"]), now_.load() + 600'000);
  EXPECT_EQ((*mine)["run_time_source"], "time_limit");
}

TEST_F(ForecastServiceTest, ASubmittedJobsForecastIsStoredAndComparedWithItsStartAndEnd) {
  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  std::vector<std::pair<std::string, double>> observed;
  ForecastServiceOptions opts;
  opts.observe_error = [&](const std::string& what, double s) { observed.push_back({what, s}); };
  ForecastService forecasts(db_, api::SpecLimits{}, clock(), opts);
  SchedulerLoop::Options loop_opts;
  SchedulerLoop loop(
      db_, loop_opts, clock(), nullptr, nullptr,
      {.forecast = [&](const ClusterSnapshot& s, const std::vector<JobRecord>& jobs,
                       std::vector<int64_t> ids) { forecasts.OnNewPending(s, jobs, ids); }});
  const int64_t job = Submit(Limited("next", 1, 2, 100));
  const int64_t submitted_ms = now_.load();
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_TRUE(forecasts.Flush().ok());
  {
    auto uow = Begin();
    auto stored = *uow->forecasts().ForJobs({job});
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(stored[job].made_ms, submitted_ms);
    EXPECT_EQ(stored[job].start_ms, submitted_ms + 600'000);
    EXPECT_EQ(stored[job].end_ms, submitted_ms + 700'000);
    EXPECT_EQ(stored[job].run_seconds, 100.0);
  }
  // A second cycle does not forecast it again.
  now_ += 1000;
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_TRUE(forecasts.Flush().ok());
  EXPECT_EQ((*Begin()->forecasts().ForJobs({job}))[job].made_ms, submitted_ms);

  // It starts 30 s later than forecast and ends 10 s earlier.
  auto set = [&](JobState state, int64_t at) {
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(job, std::nullopt, true);
    j.state = state;
    (state == JobState::kRunning ? j.started_ms : j.finished_ms) = at;
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  };
  set(JobState::kRunning, submitted_ms + 630'000);
  auto judged = forecasts.Judge();
  ASSERT_TRUE(judged.ok()) << judged.status().ToString();
  ASSERT_EQ(observed.size(), 1u);
  EXPECT_EQ(observed[0].first, "start");
  EXPECT_DOUBLE_EQ(observed[0].second, 30.0);
  EXPECT_TRUE(forecasts.Judge()->empty());  // compared once
  set(JobState::kSucceeded, submitted_ms + 690'000);
  ASSERT_TRUE(forecasts.Judge().ok());
  ASSERT_EQ(observed.size(), 2u);
  EXPECT_EQ(observed[1].first, "end");
  EXPECT_DOUBLE_EQ(observed[1].second, -10.0);
  EXPECT_TRUE(forecasts.Judge()->empty());

  auto view = Jobs().Get(member_, job);
  ASSERT_TRUE(view.ok());
  const json j = ToJson(*view);
  ASSERT_TRUE(j.contains("forecast")) << j.dump();
  EXPECT_EQ(j["forecast"]["start_error_seconds"], 30.0);
  EXPECT_EQ(j["forecast"]["end_error_seconds"], -10.0);
  EXPECT_EQ(Ms(j["forecast"]["predicted_start"]), submitted_ms + 600'000);
}

// Twenty jobs with limits of 100 s succeed after 40 s each: from then on a job's run time is
// 40% of its limit ("history"), for the job asked about and the running job ahead of it alike;
// with learn_run_times off, the limits as they are.
TEST_F(ForecastServiceTest, AfterJobsRanUnderTheirLimitsRunTimesComeFromHistory) {
  ParkNode("parked", 4);  // admits the jobs, places none
  ForecastServiceOptions learning;
  ForecastServiceOptions limits_only;
  limits_only.learn_run_times = false;
  ForecastService forecasts(db_, api::SpecLimits{}, clock(), learning);
  ForecastService plain(db_, api::SpecLimits{}, clock(), limits_only);
  SchedulerLoop loop(db_, SchedulerLoop::Options{}, clock(), nullptr, nullptr,
                     {.forecast = [&](const ClusterSnapshot& s, const std::vector<JobRecord>& jobs,
                                      std::vector<int64_t> ids) {
                       forecasts.OnNewPending(s, jobs, ids);
                       plain.OnNewPending(s, jobs, ids);
                     }});
  std::vector<int64_t> done;
  for (int i = 0; i < 20; ++i) done.push_back(Submit(Limited("done", 1, 1, 100)));
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_TRUE(forecasts.Flush().ok());
  ASSERT_TRUE(plain.Flush().ok());
  for (int64_t id : done) {
    auto uow = Begin();
    JobRecord j = **uow->jobs().Get(id, std::nullopt, true);
    j.state = JobState::kSucceeded;
    j.started_ms = now_.load();
    j.finished_ms = now_.load() + 40'000;
    ASSERT_TRUE(uow->jobs().Update(j).ok());
    ASSERT_TRUE(uow->Commit().ok());
  }
  // Before the comparison nothing is learned; the judge feeds the history.
  auto before = Wire(forecasts.DryRun(member_, Limited("ask", 1, 1, 100)));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ((*before)["run_time_source"], "time_limit");
  ASSERT_TRUE(forecasts.Judge().ok());
  ASSERT_TRUE(plain.Judge().ok());

  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  auto f = Wire(forecasts.DryRun(member_, Limited("next", 1, 2, 100)));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)["run_time_source"], "history");
  EXPECT_DOUBLE_EQ((*f)["predicted_run_seconds"].get<double>(), 40.0);
  EXPECT_EQ(Ms((*f)["predicted_start"]), now_.load() + 240'000);  // 40% of the running 600 s
  auto g = Wire(plain.DryRun(member_, Limited("next", 1, 2, 100)));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)["run_time_source"], "time_limit");
  EXPECT_EQ(Ms((*g)["predicted_start"]), now_.load() + 600'000);
}


// With snapshot_max_age_ms set, a dry run starts from the scheduler loop's latest snapshot
// while it is fresh, and predicts what reading the store predicts when nothing changed since;
// before the first cycle, and once the snapshot is older, it reads the store.
TEST_F(ForecastServiceTest, ADryRunStartsFromTheSchedulersSnapshotWhileItIsFresh) {
  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  Submit(Limited("queued", 1, 2, 100));
  ForecastServiceOptions fresh;
  fresh.snapshot_max_age_ms = 5000;
  ForecastService snap(db_, api::SpecLimits{}, clock(), fresh);
  ForecastService store = Forecasts();
  SchedulerLoop loop(
      db_, SchedulerLoop::Options{}, clock(), nullptr, nullptr,
      {.forecast = [&](const ClusterSnapshot& s, const std::vector<JobRecord>& jobs,
                       std::vector<int64_t> ids) { snap.OnNewPending(s, jobs, ids); }});
  const std::string ask = Limited("ask", 1, 2, 100);
  auto before = Wire(snap.DryRun(member_, ask));
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ((*before)["cluster_from"], "store");

  ASSERT_TRUE(loop.RunOnce().ok());
  const int64_t cycle_ms = now_.load();
  now_ += 1000;
  auto a = Wire(snap.DryRun(member_, ask));
  auto b = Wire(store.DryRun(member_, ask));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)["cluster_from"], "scheduler_snapshot");
  EXPECT_EQ(Ms((*a)["as_of"]), cycle_ms);
  EXPECT_EQ((*b)["cluster_from"], "store");
  EXPECT_GT(Ms((*a)["predicted_start"]), now_.load() + 600'000);  // behind "queued"
  EXPECT_EQ((*a)["predicted_start"], (*b)["predicted_start"]);
  EXPECT_EQ((*a)["placement"], (*b)["placement"]);

  now_ += 5000;  // the snapshot is 6 s old
  auto c = Wire(snap.DryRun(member_, ask));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)["cluster_from"], "store");
  EXPECT_EQ((*c)["predicted_start"], (*b)["predicted_start"]);
}

// While dry runs are asked, each latest snapshot's queue is run forward once (ForwardPlan) and
// dry runs are answered against that kept run: the same forecast as reading the store, for a job
// behind the queue and for one ahead of it by priority.
TEST_F(ForecastServiceTest, ADryRunIsAnsweredAgainstTheSnapshotsKeptRunWhileDryRunsAreAsked) {
  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  for (int i = 0; i < 4; ++i) Submit(Limited("queued-" + std::to_string(i), 1, 1, 100 + 50 * i));
  ForecastServiceOptions fresh;
  fresh.snapshot_max_age_ms = 5000;
  fresh.plan_max_age_ms = 5000;
  ForecastService snap(db_, api::SpecLimits{}, clock(), fresh);
  ForecastService store = Forecasts();
  SchedulerLoop loop(
      db_, SchedulerLoop::Options{}, clock(), nullptr, nullptr,
      {.forecast = [&](const ClusterSnapshot& s, const std::vector<JobRecord>& jobs,
                       std::vector<int64_t> ids) { snap.OnNewPending(s, jobs, ids); }});
  const std::string behind = Limited("behind", 1, 1, 100);
  json ahead_spec = json::parse(Limited("ahead", 1, 2, 100));
  ahead_spec["priority"] = 90;
  const std::string ahead = ahead_spec.dump();
  ASSERT_TRUE(loop.RunOnce().ok());
  ASSERT_TRUE(snap.Flush().ok());
  auto first = Wire(snap.DryRun(member_, behind));  // no kept run yet: it asks for one
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)["cluster_from"], "scheduler_snapshot");
  ASSERT_TRUE(snap.Flush().ok());
  now_ += 1000;
  for (const std::string& ask : {behind, ahead}) {
    auto a = Wire(snap.DryRun(member_, ask));
    auto b = Wire(store.DryRun(member_, ask));
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    EXPECT_EQ((*a)["cluster_from"], "scheduler_plan");
    EXPECT_EQ((*b)["cluster_from"], "store");
    EXPECT_FALSE((*a)["predicted_start"].is_null());
    EXPECT_EQ((*a)["predicted_start"], (*b)["predicted_start"]) << ask;
    EXPECT_EQ((*a)["placement"], (*b)["placement"]) << ask;
    EXPECT_EQ((*a)["jobs_ahead"], (*b)["jobs_ahead"]) << ask;
    EXPECT_EQ((*a)["reasons"], (*b)["reasons"]) << ask;
  }
  now_ += 5000;  // the kept run's snapshot is 6 s old
  auto c = Wire(snap.DryRun(member_, behind));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)["cluster_from"], "store");
}

// Keeping the run is paced: right after one was kept, the next snapshot is not run forward
// (the gap is the last run's time times plan_rebuild_gap_factor, here made huge), and dry runs
// are answered against the run already kept meanwhile, without waiting for another; once that
// run's snapshot is half its allowed age old, the latest is run forward anyway.
TEST_F(ForecastServiceTest, KeptRunsArePacedAndADryRunIsAnsweredFromTheLastKeptMeanwhile) {
  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  for (int i = 0; i < 3; ++i) Submit(Limited("queued-" + std::to_string(i), 1, 1, 100));
  ForecastServiceOptions paced;
  paced.snapshot_max_age_ms = 5000;
  paced.plan_max_age_ms = 5000;
  paced.plan_rebuild_gap_factor = 1e9;
  ForecastService snap(db_, api::SpecLimits{}, clock(), paced);
  SchedulerLoop loop(
      db_, SchedulerLoop::Options{}, clock(), nullptr, nullptr,
      {.forecast = [&](const ClusterSnapshot& s, const std::vector<JobRecord>& jobs,
                       std::vector<int64_t> ids) { snap.OnNewPending(s, jobs, ids); }});
  const std::string ask = Limited("ask", 1, 1, 100);
  ASSERT_TRUE(loop.RunOnce().ok());
  const int64_t first_ms = now_.load();
  ASSERT_TRUE(snap.DryRun(member_, ask).ok());  // asks for a kept run
  ASSERT_TRUE(snap.Flush().ok());
  auto kept = Wire(snap.DryRun(member_, ask));
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ((*kept)["cluster_from"], "scheduler_plan");
  EXPECT_EQ(Ms((*kept)["as_of"]), first_ms);

  now_ += 1000;
  ASSERT_TRUE(loop.RunOnce().ok());  // a newer snapshot: too soon to run it forward
  ASSERT_TRUE(snap.Flush().ok());
  auto meanwhile = Wire(snap.DryRun(member_, ask));
  ASSERT_TRUE(meanwhile.ok());
  EXPECT_EQ((*meanwhile)["cluster_from"], "scheduler_plan");
  EXPECT_EQ(Ms((*meanwhile)["as_of"]), first_ms);
  EXPECT_EQ((*meanwhile)["predicted_start"], (*kept)["predicted_start"]);

  now_ += 2000;  // the kept run's snapshot is 3 s old: half of 5 s passed
  ASSERT_TRUE(loop.RunOnce().ok());
  const int64_t third_ms = now_.load();
  ASSERT_TRUE(snap.Flush().ok());
  auto renewed = Wire(snap.DryRun(member_, ask));
  ASSERT_TRUE(renewed.ok());
  EXPECT_EQ((*renewed)["cluster_from"], "scheduler_plan");
  EXPECT_EQ(Ms((*renewed)["as_of"]), third_ms);
}

// A snapshot whose queue has gone (its pending job cancelled, the next cycle finding nothing
// pending) is not used: the dry run reads the store and is not put behind the cancelled job.
TEST_F(ForecastServiceTest, ADryRunForgetsTheSnapshotOnceNothingIsPending) {
  const int64_t n1 = Node("n1", 2);
  PlacedJob(member_, n1, Limited("running", 1, 2, 600), 2);
  const int64_t queued = Submit(Limited("queued", 1, 2, 100));
  ForecastServiceOptions fresh;
  fresh.snapshot_max_age_ms = 5000;
  ForecastService snap(db_, api::SpecLimits{}, clock(), fresh);
  SchedulerLoop loop(
      db_, SchedulerLoop::Options{}, clock(), nullptr, nullptr,
      {.forecast = [&](const ClusterSnapshot& s, const std::vector<JobRecord>& jobs,
                       std::vector<int64_t> ids) { snap.OnNewPending(s, jobs, ids); },
       .forecast_idle = [&] { snap.ForgetSnapshot(); }});
  ASSERT_TRUE(loop.RunOnce().ok());
  const std::string ask = Limited("ask", 1, 2, 100);
  auto behind = Wire(snap.DryRun(member_, ask));
  ASSERT_TRUE(behind.ok());
  EXPECT_EQ((*behind)["cluster_from"], "scheduler_snapshot");
  EXPECT_EQ((*behind)["jobs_ahead"], 1);

  ASSERT_TRUE(Jobs().Cancel(member_, queued).ok());
  ASSERT_TRUE(loop.RunOnce().ok());
  auto after = Wire(snap.DryRun(member_, ask));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["cluster_from"], "store");
  EXPECT_EQ((*after)["jobs_ahead"], 0);
}

}  // namespace
}  // namespace controlplane::service
