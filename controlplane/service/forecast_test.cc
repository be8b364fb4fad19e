// The forward run (forecast.h): the fast run (ends that cannot change the decision jumped over,
// later cycles over the kept queue that stop where the rest can change nothing, no waiting
// reasons after the first cycle) predicts what the plain run that calls Schedule() at every
// expected end predicts, on hundreds of random clusters and queues, small and long, for every
// job and for a dry run's job at the back of the queue or ahead of others by priority or fair
// share (each failure prints its seed), also against kept runs of long queues answered by
// jumping over their saved states; a decision over the kept queue places, reserves and preempts
// what Schedule() does; and a learned hand-over delays each job of a chain by one.
#include "controlplane/service/forecast.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "controlplane/service/pending_queue.h"

#include "controlplane/testing/scheduler_builders.h"

namespace controlplane::service {
namespace {

using testing::Between;
using testing::kNowMs;
using testing::Pick;

struct ForecastWorld {
  ClusterSnapshot s;
  ForecastTimes times;
  ForecastOptions o;
};

// `scale` 1: up to 8 nodes and 14 pending jobs; larger: that many times more of both.
ForecastWorld RandomForecastWorld(uint64_t seed, int scale = 1) {
  std::mt19937_64 rng(seed);
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  ForecastWorld w;
  w.s.now_ms = kNowMs;
  const int nodes = Between(rng, 1, 8 * scale);
  for (int i = 1; i <= nodes; ++i) {
    SchedNode n = testing::Node(i, Pick(rng, {1, 1, 2, 4}), Pick(rng, {0, 0, 2}));
    n.draining = chance(0.1);
    w.s.nodes.push_back(n);
  }
  const int tenants = Between(rng, 1, 3);
  for (int t = 1; t <= tenants; ++t) {
    SchedTenant st = testing::Tenant(t, 0.5 + Between(rng, 0, 3) * 0.5);
    if (chance(0.2)) st.limits.slots = Between(rng, 2, 16);
    if (chance(0.2)) st.limits.running_jobs = Between(rng, 1, 4);
    st.usage[kCpuSlots] = Between(rng, 0, 100000);
    w.s.tenants.push_back(st);
  }
  int64_t id = 1000;
  for (int r = Between(rng, 0, 2 * nodes); r > 0; --r) {
    const std::string type = chance(0.8) ? "cpu" : "gpu";
    const int slots = Pick(rng, {1, 1, 2});
    std::vector<int64_t> on;
    for (const SchedNode& n : w.s.nodes) {
      const int free = type == "gpu" ? n.free_gpu : n.free_cpu;
      if (free >= slots && chance(0.4) && on.size() < 3) on.push_back(n.id);
    }
    if (on.empty()) continue;
    RunningJob j = testing::Running(w.s.nodes, ++id, on, slots, Pick(rng, {0, 10, 50}),
                                    Between(rng, 0, 100), chance(0.1) ? 0 : Between(rng, 60, 600),
                                    Between(rng, 1, tenants), type);
    j.preempting = chance(0.05);
    for (SchedTenant& t : w.s.tenants) {
      if (t.id != j.tenant_id) continue;
      t.slots_in_use += static_cast<int64_t>(slots) * static_cast<int64_t>(on.size());
      t.running_jobs += 1;
    }
    if (chance(0.5)) w.times.running_end_ms[j.job_id] = kNowMs + Between(rng, 1, 300) * 1000;
    w.s.running.push_back(j);
  }
  for (int p = Between(rng, 1, 14 * scale); p > 0; --p) {
    testing::JobArgs a;
    a.tenant = Between(rng, 1, tenants);
    a.nodes = Pick(rng, {1, 1, 2, 3});
    a.ranks_per_node = Pick(rng, {1, 1, 2});
    a.slot_type = chance(0.85) ? "cpu" : "gpu";
    a.priority = Pick(rng, {0, 10, 50});
    a.limit_s = chance(0.1) ? 0 : Between(rng, 10, 400);
    a.submit_ms = Between(rng, 1, 1000000);
    const PendingJob job = testing::Job(++id, a);
    if (chance(0.5)) w.times.run_ms[job.job_id] = Between(rng, 1, 400) * 1000;
    w.s.pending.push_back(job);
  }
  w.times.handover_ms = Pick(rng, {0, 0, 700, 2500});
  w.o.schedule.max_reservations = Between(rng, 1, 4);
  if (chance(0.2)) w.o.schedule.preempt_min_priority = 50;
  w.o.schedule.preempt_grace_ms = Between(rng, 1, 60) * 1000;
  return w;
}

std::string Show(const JobForecast& f) {
  std::string s = "start " + (f.start_ms ? std::to_string(*f.start_ms - kNowMs) : "-") +
                  " end " + (f.end_ms ? std::to_string(*f.end_ms - kNowMs) : "-") + " on";
  for (const NodeShare& n : f.nodes) s += " " + std::to_string(n.node_id);
  return s + (f.starts_now ? " now" : "") + " '" + f.unknown_reason + "' waits " +
         std::to_string(f.waits.size());
}

// Fast and plain runs of `w`, for `wanted`, predict the same.
void ExpectSameForecasts(const ForecastWorld& w, const std::vector<int64_t>& wanted, uint64_t seed,
                         int* compared, int* later) {
  ForecastOptions reference = w.o;
  reference.reference = true;
  const auto fast = ForecastStarts(w.s, w.times, wanted, w.o);
  const auto plain = ForecastStarts(w.s, w.times, wanted, reference);
  ASSERT_EQ(fast.size(), plain.size()) << "seed " << seed;
  for (const auto& [id, f] : plain) {
    const JobForecast& g = fast.at(id);
    ASSERT_EQ(Show(g), Show(f)) << "seed " << seed << " job " << id;
    EXPECT_EQ(g.waits, f.waits) << "seed " << seed << " job " << id;
    EXPECT_EQ(g.reason_now, f.reason_now) << "seed " << seed;
    EXPECT_EQ(g.jobs_ahead, f.jobs_ahead) << "seed " << seed;
    ++*compared;
    if (f.start_ms && !f.starts_now) ++*later;
  }
}

TEST(ForecastTest, TheFastRunPredictsWhatTheRunOfEveryEndPredicts) {
  int compared = 0, later = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    ForecastWorld w = RandomForecastWorld(seed);
    // Every pending job, and the last one alone (a dry run asks for one).
    for (const std::vector<int64_t>& wanted :
         {std::vector<int64_t>{}, std::vector<int64_t>{w.s.pending.back().job_id}}) {
      ExpectSameForecasts(w, wanted, seed, &compared, &later);
    }
  }
  // The worlds must exercise forward runs, not only jobs that start at once.
  EXPECT_GT(later, compared / 4) << later << " of " << compared;
}


// Long queues on larger clusters, where the cycles over the kept queue stop early.
TEST(ForecastTest, TheFastRunPredictsWhatThePlainRunPredictsOnLongQueues) {
  int compared = 0, later = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    ForecastWorld w = RandomForecastWorld(seed, 12);
    w.o.max_cycles = 100'000;
    ExpectSameForecasts(w, {}, seed, &compared, &later);
  }
  EXPECT_GT(later, compared / 4) << later << " of " << compared;
}

// A dry run adds one job to the queue and asks for it alone: at the back (the lowest priority,
// submitted last), ahead of others by priority, or ahead by fair share (a tenant with no usage);
// the fast run, and the answer against a kept run of the queue without it (ForwardPlan), predict
// what the plain run does.
TEST(ForecastTest, TheFastRunPredictsWhatThePlainRunPredictsForADryRunsJob) {
  int compared = 0, later = 0;
  size_t replayed = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    for (int where = 0; where < 3; ++where) {
      ForecastWorld w = RandomForecastWorld(seed, seed % 3 == 0 ? 6 : 1);
      std::mt19937_64 rng(seed * 7 + where);
      testing::JobArgs a;
      a.nodes = Pick(rng, {1, 1, 2, 3});
      a.limit_s = Between(rng, 10, 400);
      a.submit_ms = 2'000'000;  // after every other job
      a.tenant = w.s.tenants.front().id;
      a.priority = 0;
      if (where == 1) a.priority = 60;
      if (where == 2) {
        a.priority = 10;
        a.tenant = 99;
        w.s.tenants.push_back(testing::Tenant(99, 4));
      }
      const int64_t id = std::numeric_limits<int64_t>::max();
      const PendingJob job = testing::Job(id, a);
      std::optional<int64_t> run_ms;
      if (seed % 2 == 0) run_ms = Between(rng, 1, 400) * 1000;
      // Against the kept run of the queue without it (ForwardPlan), as the server answers.
      const ForwardPlan plan(w.s, w.times, w.o);
      size_t kept = 0;
      const JobForecast planned = plan.Forecast(job, run_ms, &kept);
      replayed += kept;
      w.s.pending.push_back(job);
      if (run_ms) w.times.run_ms[id] = *run_ms;
      ExpectSameForecasts(w, {id}, seed, &compared, &later);
      ForecastOptions reference = w.o;
      reference.reference = true;
      const JobForecast plain = ForecastStarts(w.s, w.times, {id}, reference).at(id);
      ASSERT_EQ(Show(planned), Show(plain)) << "seed " << seed << " where " << where;
      EXPECT_EQ(planned.waits, plain.waits) << "seed " << seed << " where " << where;
      EXPECT_EQ(planned.reason_now, plain.reason_now) << "seed " << seed;
      EXPECT_EQ(planned.jobs_ahead, plain.jobs_ahead) << "seed " << seed;
    }
  }
  EXPECT_GT(later, compared / 4) << later << " of " << compared;
  // The kept runs must have been replayed, not only decided again.
  EXPECT_GT(replayed, 300u);
}

// The same against kept runs of long queues, where an answer replays hundreds of turns: most of
// them passed over by jumping to the kept run's saved states, and turns decided with the job in
// them that it did not change followed by kept turns again.
TEST(ForecastTest, AKeptRunOfALongQueueAnswersAsThePlainRun) {
  size_t replayed = 0, jumped = 0, asked = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    ForecastWorld w = RandomForecastWorld(seed, 12);
    w.o.max_cycles = 100'000;
    const ForwardPlan plan(w.s, w.times, w.o);
    ForecastOptions reference = w.o;
    reference.reference = true;
    std::mt19937_64 rng(seed * 13);
    for (int ask = 0; ask < 3; ++ask) {
      testing::JobArgs a;
      a.nodes = Pick(rng, {1, 1, 2, 3});
      a.ranks_per_node = Pick(rng, {1, 1, 2});
      a.limit_s = Between(rng, 10, 400);
      a.submit_ms = 2'000'000 + ask;  // after every other job
      a.tenant = w.s.tenants[Between(rng, 0, static_cast<int>(w.s.tenants.size()) - 1)].id;
      a.priority = Pick(rng, {0, 0, 10});
      const int64_t id = std::numeric_limits<int64_t>::max() - ask;
      const PendingJob job = testing::Job(id, a);
      const std::optional<int64_t> run_ms = Between(rng, 1, 400) * 1000;
      size_t kept = 0, passed = 0;
      const JobForecast got = plan.Forecast(job, run_ms, &kept, nullptr, &passed);
      replayed += kept;
      jumped += passed;
      ++asked;
      ForecastWorld with = w;
      with.s.pending.push_back(job);
      with.times.run_ms[id] = *run_ms;
      const JobForecast want = ForecastStarts(with.s, with.times, {id}, reference).at(id);
      ASSERT_EQ(Show(got), Show(want)) << "seed " << seed << " ask " << ask;
      EXPECT_EQ(got.waits, want.waits) << "seed " << seed << " ask " << ask;
      EXPECT_EQ(got.reason_now, want.reason_now) << "seed " << seed;
      EXPECT_EQ(got.jobs_ahead, want.jobs_ahead) << "seed " << seed;
    }
  }
  // The answers must have replayed the kept runs, a good part of them by jumping.
  EXPECT_GT(replayed, 20 * asked);
  EXPECT_GT(jumped, replayed / 5) << jumped << " of " << replayed;
}

// A kept run keeps its answers: the same job asked again (a later submit time, still after every
// queued job) is answered from the first ask, and that answer is the plain run's for the later
// ask too; a different run time, or a job not after every queued job, is decided afresh.
TEST(ForecastTest, AKeptRunAnswersTheSameJobAgainAsThePlainRunWould) {
  int cached = 0, asked = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    ForecastWorld w = RandomForecastWorld(seed, seed % 3 == 0 ? 6 : 1);
    std::mt19937_64 rng(seed * 11);
    testing::JobArgs a;
    a.nodes = Pick(rng, {1, 1, 2, 3});
    a.limit_s = Between(rng, 10, 400);
    a.tenant = w.s.tenants.front().id;
    a.priority = Pick(rng, {0, 10, 60});
    const int64_t id = std::numeric_limits<int64_t>::max();
    const ForwardPlan plan(w.s, w.times, w.o);
    const std::optional<int64_t> run_ms = Between(rng, 1, 400) * 1000;
    ForecastOptions reference = w.o;
    reference.reference = true;
    auto plain = [&](const PendingJob& job, std::optional<int64_t> run) {
      ForecastWorld with = w;
      with.s.pending.push_back(job);
      if (run) with.times.run_ms[job.job_id] = *run;
      return ForecastStarts(with.s, with.times, {job.job_id}, reference).at(job.job_id);
    };
    // (submit time, run time, kept answer expected)
    const std::tuple<int64_t, std::optional<int64_t>, bool> asks[] = {
        {2'000'000, run_ms, false},       // first ask: decided
        {3'000'000, run_ms, true},        // the same job later: kept
        {3'000'000, *run_ms + 1000, false},  // another run time
        {1, run_ms, false},               // ahead of the queue by age
        {1, run_ms, false},               // and again: not kept
    };
    for (const auto& [submit_ms, run, expect_cached] : asks) {
      a.submit_ms = submit_ms;
      const PendingJob job = testing::Job(id, a);
      bool was_cached = true;
      const JobForecast got = plan.Forecast(job, run, nullptr, &was_cached);
      EXPECT_EQ(was_cached, expect_cached) << "seed " << seed << " submit " << submit_ms;
      const JobForecast want = plain(job, run);
      ASSERT_EQ(Show(got), Show(want)) << "seed " << seed << " submit " << submit_ms;
      EXPECT_EQ(got.waits, want.waits) << "seed " << seed;
      EXPECT_EQ(got.jobs_ahead, want.jobs_ahead) << "seed " << seed;
      cached += was_cached;
      ++asked;
    }
  }
  EXPECT_EQ(cached, asked / 5);
}

// A decision over the kept queue, reasons off, places, reserves and preempts what Schedule()
// does, also after jobs are taken out of the queue.
TEST(ForecastTest, ADecisionOverTheKeptQueueIsSchedules) {
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    ForecastWorld w = RandomForecastWorld(seed, seed % 4 == 0 ? 10 : 1);
    ScheduleOptions quiet = w.o.schedule;
    quiet.explain = false;
    PendingQueue queue(w.s.pending);
    std::mt19937_64 rng(seed);
    std::vector<PendingJob> left;
    for (const PendingJob& p : w.s.pending) {
      if (std::bernoulli_distribution(0.2)(rng)) {
        queue.Take(p.job_id);
      } else {
        left.push_back(p);
      }
    }
    ClusterSnapshot plain = w.s;
    plain.pending = left;
    ClusterSnapshot bare = w.s;
    bare.pending.clear();
    const ScheduleDecision want = Schedule(plain, quiet);
    const ScheduleDecision got = ScheduleQueue(bare, queue, quiet);
    ASSERT_EQ(got.placements.size(), want.placements.size()) << "seed " << seed;
    for (size_t i = 0; i < want.placements.size(); ++i) {
      EXPECT_EQ(got.placements[i].job_id, want.placements[i].job_id) << "seed " << seed;
      ASSERT_EQ(got.placements[i].nodes.size(), want.placements[i].nodes.size());
      for (size_t n = 0; n < want.placements[i].nodes.size(); ++n) {
        EXPECT_EQ(got.placements[i].nodes[n].node_id, want.placements[i].nodes[n].node_id);
      }
    }
    ASSERT_EQ(got.reservations.size(), want.reservations.size()) << "seed " << seed;
    for (size_t i = 0; i < want.reservations.size(); ++i) {
      EXPECT_EQ(got.reservations[i].job_id, want.reservations[i].job_id) << "seed " << seed;
      EXPECT_EQ(got.reservations[i].node_ids, want.reservations[i].node_ids) << "seed " << seed;
      EXPECT_EQ(got.reservations[i].start_ms, want.reservations[i].start_ms) << "seed " << seed;
    }
    ASSERT_EQ(got.preemptions.size(), want.preemptions.size()) << "seed " << seed;
    for (size_t i = 0; i < want.preemptions.size(); ++i) {
      EXPECT_EQ(got.preemptions[i].victims, want.preemptions[i].victims) << "seed " << seed;
    }
    // What it considered is what Schedule() considered up to where it stopped, each job
    // once: the same jobs as the start of Schedule()'s order, though jobs passed over as
    // inert (Cycle::Inert) are listed where their tenant's turn passed them, not where their
    // own turn would have come.
    ASSERT_LE(got.order.size(), want.order.size());
    std::vector<int64_t> got_ids = got.order, want_ids(want.order.begin(),
                                                       want.order.begin() + got.order.size());
    std::sort(got_ids.begin(), got_ids.end());
    std::sort(want_ids.begin(), want_ids.end());
    EXPECT_TRUE(std::adjacent_find(got_ids.begin(), got_ids.end()) == got_ids.end())
        << "seed " << seed;
    if (got.order.size() == want.order.size()) {
      EXPECT_EQ(got_ids, want_ids) << "seed " << seed;
    } else {
      std::vector<int64_t> all = want.order;
      std::sort(all.begin(), all.end());
      EXPECT_TRUE(std::includes(all.begin(), all.end(), got_ids.begin(), got_ids.end()))
          << "seed " << seed;
    }
  }
}

// One node of one slot, busy for 10 s more; A and B (20 s each) wait in line behind it. Each
// hand-over of the slot costs 1 s: A starts 1 s after the running job ends, B 2 s later than
// without hand-overs.
TEST(ForecastTest, EachHandOverOfAChainDelaysTheJobsBehindIt) {
  ClusterSnapshot s;
  s.now_ms = kNowMs;
  s.nodes.push_back(testing::Node(1, 1));
  s.tenants.push_back(testing::Tenant(1));
  s.running.push_back(testing::Running(s.nodes, 10, {1}, 1, 0, 50, 60));
  s.pending.push_back(testing::Job(1, {.limit_s = 20}));
  s.pending.push_back(testing::Job(2, {.limit_s = 20}));
  ForecastTimes times;
  auto plain = ForecastStarts(s, times, {}, ForecastOptions{});
  EXPECT_EQ(plain[1].start_ms, kNowMs + 10'000);
  EXPECT_EQ(plain[2].start_ms, kNowMs + 30'000);
  times.handover_ms = 1000;
  auto handed = ForecastStarts(s, times, {}, ForecastOptions{});
  EXPECT_EQ(handed[1].start_ms, kNowMs + 11'000);
  EXPECT_EQ(handed[1].end_ms, kNowMs + 31'000);
  EXPECT_EQ(handed[2].start_ms, kNowMs + 32'000);
  // A job that starts now is placed by this very cycle: no hand-over.
  s.running.clear();
  s.nodes[0].free_cpu = 1;
  auto idle = ForecastStarts(s, times, {}, ForecastOptions{});
  EXPECT_TRUE(idle[1].starts_now);
  EXPECT_EQ(idle[1].start_ms, kNowMs);
  EXPECT_EQ(idle[2].start_ms, kNowMs + 21'000);
}

}  // namespace
}  // namespace controlplane::service
