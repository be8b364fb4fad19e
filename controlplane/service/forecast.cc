// The forward run of the scheduler (forecast.h).
#include "controlplane/service/forecast.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

#include "common/time_util.h"
#include "controlplane/service/pending_queue.h"
#include "controlplane/service/forward_run_internal.h"
#include "controlplane/service/slot_timeline.h"

namespace controlplane::service {

namespace {

using namespace forecast_internal;

constexpr size_t kMaxReservationsNamed = 3;

std::string JoinIds(const std::vector<int64_t>& ids, size_t most) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < most; ++i) {
    s += (s.empty() ? "" : ", ") + std::to_string(ids[i]);
  }
  if (ids.size() > most) s += " and " + std::to_string(ids.size() - most) + " more";
  return s;
}

// What a job waits on now, read off the first decision.
void DescribeNow(const ScheduleDecision& d, JobForecast& f) {
  auto why = d.waiting.find(f.job_id);
  if (why == d.waiting.end()) return;
  f.reason_now = why->second;
  f.never_fits = f.reason_now.rfind("never fits:", 0) == 0;
  auto at = std::find(d.order.begin(), d.order.end(), f.job_id);
  f.jobs_ahead = at - d.order.begin();
  if (f.never_fits) {
    f.unknown_reason = f.reason_now;
    return;
  }
  f.waits.push_back(f.reason_now);
  if (f.jobs_ahead > 0) {
    f.waits.push_back(std::to_string(f.jobs_ahead) +
                      " pending jobs go before it (priority, then fair share, then age)");
  }
  // Reservations of jobs considered before it hold slots it might have used.
  std::vector<int64_t> reserved;
  for (const Reservation& r : d.reservations) reserved.push_back(r.job_id);
  std::sort(reserved.begin(), reserved.end());
  std::unordered_set<int64_t> ahead;
  for (auto it = d.order.begin(); it != at; ++it) {
    if (std::binary_search(reserved.begin(), reserved.end(), *it)) ahead.insert(*it);
  }
  size_t named = 0, more = 0;
  for (const Reservation& r : d.reservations) {
    if (r.job_id == f.job_id || !ahead.count(r.job_id)) continue;
    if (named == kMaxReservationsNamed) {
      ++more;
      continue;
    }
    ++named;
    f.waits.push_back("reservation for job " + std::to_string(r.job_id) + " on " +
                      std::to_string(r.node_ids.size()) + " nodes from " +
                      common::FormatTimeMillis(r.start_ms));
  }
  if (more > 0) f.waits.push_back(std::to_string(more) + " more reservations of jobs ahead");
}

// True when `job` changed nothing in the decision `d` it was part of: it is not placed, and
// holds no reservation and makes no preemption (so the others' placements are as without it).
bool Inert(const ScheduleDecision& d, int64_t job) {
  auto is = [&](const auto& x) { return x.job_id == job; };
  return std::none_of(d.placements.begin(), d.placements.end(), is) &&
         std::none_of(d.reservations.begin(), d.reservations.end(), is) &&
         std::none_of(d.preemptions.begin(), d.preemptions.end(), is);
}

// True when adding `job` (of `shape`) to the queue cannot change `turn`'s decision: the cycle
// stopped before considering it (a higher priority, or its tenant's older jobs of its priority
// were still waiting their turn, and it goes after them), a shape asking no more than its own
// unable to be placed, and every reservation made or one for no more slots and nodes failed.
bool Unchanged(const PlanTurn& turn, const PendingJob& job, const JobShape& shape) {
  if (turn.idle || !turn.decision.settled) return false;
  const QueueStop& stop = *turn.decision.settled;
  const bool before = stop.before_any || stop.priority > job.priority ||
                      (stop.priority == job.priority &&
                       std::find(stop.tenants_left.begin(), stop.tenants_left.end(),
                                 job.tenant_id) != stop.tenants_left.end());
  if (!before || std::none_of(stop.unplaceable.begin(), stop.unplaceable.end(),
                              [&](const JobShape& u) { return AsksNoMore(u, shape); })) {
    return false;
  }
  if (stop.reservations_made) return true;
  return std::any_of(stop.unreservable.begin(), stop.unreservable.end(), [&](const JobShape& u) {
    return std::get<0>(u) == std::get<0>(shape) && std::get<1>(u) <= std::get<1>(shape) &&
           std::get<2>(u) <= std::get<2>(shape);
  });
}

// The loop of a forward run (ForecastStarts) for the jobs of `open`. With `replay` (the turns of
// the same run without `asked`, ForwardPlan), a turn whose kept decision `asked` cannot change
// is replayed instead of decided; a turn it might change is decided, and replaying goes on after
// it only if `asked` changed nothing there (Inert), the run being the kept one still. With
// `record`, every turn's decision is kept; with `save`, the run's state every kCheckpointEvery
// turns (a kept run). `jump`: the saved states of the kept run `replay` is, and `base` its queue
// (`run` built from them): while replaying, the run jumps to the last saved turn up to the next
// turn `asked` might change, instead of replaying the turns between one by one.
// Returns the turns replayed, jumped over included (`jumped`: those).
size_t RunForward(ForwardRun& run, const ForecastTimes& times, const ForecastOptions& options,
                  std::map<int64_t, JobForecast>& out, std::unordered_set<int64_t>& open,
                  const std::vector<PlanTurn>* replay, const PendingJob* asked,
                  std::vector<PlanTurn>* record,
                  std::vector<std::unique_ptr<const PlanCheckpoint>>* save = nullptr,
                  const std::vector<std::unique_ptr<const PlanCheckpoint>>* jump = nullptr,
                  const PendingQueue* base = nullptr, size_t* jumped = nullptr) {
  ScheduleOptions quiet = options.schedule;
  quiet.explain = options.reference;
  std::vector<int64_t> ended;
  int cycles = 0;
  size_t replayed = 0;
  const JobShape asked_shape = asked ? PendingQueue::ShapeOf(*asked) : JobShape{};
  size_t next_decided = 0;  // while replaying: the next turn that the job might change, or beyond
  for (size_t turn = 0; !open.empty(); ++turn) {
    if (cycles == options.max_cycles) {
      for (int64_t id : open) {
        out[id].unknown_reason = "not started within " + std::to_string(options.max_cycles) +
                                 " scheduling cycles of the forecast";
      }
      break;
    }
    if (save && turn % kCheckpointEvery == 0) save->push_back(run.Save(turn, cycles, ended));
    if (jump && replay && turn > 0) {
      if (turn > next_decided) {  // kept turns that it cannot change (an idle one: it might)
        next_decided = turn;
        while (next_decided < replay->size() && !(*replay)[next_decided].idle &&
               Unchanged((*replay)[next_decided], *asked, asked_shape)) {
          ++next_decided;
        }
      }
      // The last saved turn after this one and no later than that: the turns between would be
      // replayed, and the run is the kept one with the job queued.
      auto after = std::upper_bound(jump->begin(), jump->end(), next_decided,
                                    [](size_t t, const auto& c) { return t < c->turn; });
      if (after != jump->begin() && (*std::prev(after))->turn > turn) {
        const PlanCheckpoint& c = **std::prev(after);
        run.Restore(c, *asked, *base);
        replayed += c.turn - turn;
        if (jumped) *jumped += c.turn - turn;
        turn = c.turn;
        cycles = c.cycles;
        ended = c.ended;
      }
    }
    // The first cycle starts jobs now; later ones at an expected end, a hand-over after it.
    const int64_t delay = cycles == 0 ? 0 : std::max<int64_t>(times.handover_ms, 0);
    const bool idle = cycles > 0 && !options.reference && !run.MayPlace();
    ScheduleDecision decided;
    const ScheduleDecision* d = &decided;
    if (replay && turn > 0 && turn < replay->size() &&
        (idle || Unchanged((*replay)[turn], *asked, asked_shape))) {
      d = &(*replay)[turn].decision;
      ++replayed;
    } else {
      // Decided; replaying goes on after it while the job changes nothing (Inert): the run is
      // then still the kept one.
      if (!idle) decided = run.Decide(cycles == 0, cycles == 0 ? options.schedule : quiet);
      if (replay && !Inert(decided, asked->job_id)) replay = nullptr;
    }
    std::vector<int64_t> started;
    for (const Placement& p : d->placements) {
      if (!open.count(p.job_id)) continue;
      started.push_back(p.job_id);
      JobForecast& f = out[p.job_id];
      f.starts_now = cycles == 0;
      f.start_ms = run.now() + delay;
      f.slot_type = p.slot_type;
      f.nodes = p.nodes;
      if (!ended.empty()) {
        f.waits.push_back("starts when job" + std::string(ended.size() > 1 ? "s " : " ") +
                          JoinIds(ended, 3) + " end" + (ended.size() > 1 ? "" : "s") +
                          " (expected " + common::FormatTimeMillis(run.now()) + ")");
      }
      open.erase(p.job_id);
    }
    if (cycles == 0) {
      for (auto& [id, f] : out) {
        if (!open.count(id)) continue;
        DescribeNow(*d, f);
        if (f.never_fits) open.erase(id);
      }
    }
    if (!idle) ++cycles;
    run.Apply(*d, delay);
    if (record) {
      record->push_back({idle, {}});
      if (!idle) {
        ScheduleDecision& kept = record->back().decision;
        kept.placements = d->placements;
        kept.preemptions = d->preemptions;
        kept.settled = d->settled;
      }
    }
    for (int64_t id : started) out[id].end_ms = run.EndOf(id);
    if (open.empty()) break;
    if (!run.Advance(&ended)) {
      for (int64_t id : open) {
        out[id].unknown_reason =
            "no running job is expected to free the slots it needs: the jobs holding them have "
            "neither a time limit nor a predicted run time";
      }
      break;
    }
  }
  return replayed;
}

}  // namespace

std::map<int64_t, JobForecast> ForecastStarts(const ClusterSnapshot& snapshot,
                                              const ForecastTimes& times,
                                              const std::vector<int64_t>& wanted,
                                              const ForecastOptions& options) {
  std::map<int64_t, JobForecast> out;
  std::unordered_set<int64_t> open;  // wanted, neither started nor given up on
  for (const PendingJob& p : snapshot.pending) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), p.job_id) != wanted.end()) {
      out[p.job_id].job_id = p.job_id;
      open.insert(p.job_id);
    }
  }
  ForecastOptions asked = options;
  if (wanted.size() == 1) asked.schedule.explain_job = wanted.front();  // its reason only
  ForwardRun run(snapshot, times, asked);
  RunForward(run, times, asked, out, open, nullptr, nullptr, nullptr);
  return out;
}

ForwardPlan::ForwardPlan(ClusterSnapshot snapshot, ForecastTimes times, ForecastOptions options)
    : snapshot_(std::move(snapshot)), times_(std::move(times)), options_(options) {
  for (const PendingJob& p : snapshot_.pending) {
    last_queued_ = std::max(last_queued_, std::tuple(p.submit_ms, p.job_id));
  }
  if (options_.reference) return;
  std::map<int64_t, JobForecast> out;
  std::unordered_set<int64_t> open;
  for (const PendingJob& p : snapshot_.pending) open.insert(p.job_id);
  ForwardRun run(snapshot_, times_, options_);
  queue_ = PendingQueue(snapshot_.pending);  // in the order of the run's own
  RunForward(run, times_, options_, out, open, nullptr, nullptr, &turns_, &checkpoints_);
}

ForwardPlan::~ForwardPlan() = default;

JobForecast ForwardPlan::Forecast(const PendingJob& job, std::optional<int64_t> run_ms,
                                  size_t* replayed, bool* cached, size_t* jumped) const {
  if (cached) *cached = false;
  if (jumped) *jumped = 0;
  // After every queued job: ordered as any later submission of the same job would be.
  const bool keyed = std::tuple(job.submit_ms, job.job_id) > last_queued_;
  const api::Resources& r = job.resources;
  const AnswerKey key{job.tenant_id,         job.priority,   job.job_id,
                      r.nodes,               r.ranks_per_node, r.slot_type,
                      r.slots_per_rank,      r.memory_per_rank_bytes,
                      job.time_limit_seconds, run_ms.value_or(-1)};
  if (keyed) {
    std::lock_guard<std::mutex> lock(answers_mu_);
    auto it = answers_.find(key);
    if (it != answers_.end()) {
      if (replayed) *replayed = 0;
      if (cached) *cached = true;
      return it->second;
    }
  }
  std::optional<std::pair<int64_t, int64_t>> extra;
  if (run_ms) extra = std::pair(job.job_id, *run_ms);
  std::map<int64_t, JobForecast> out;
  out[job.job_id].job_id = job.job_id;
  std::unordered_set<int64_t> open{job.job_id};
  // The kept turns stand for the job only if it goes after every queued job of its tenant and
  // priority, as a new submission does.
  const bool last = std::none_of(snapshot_.pending.begin(), snapshot_.pending.end(), [&](auto& p) {
    return p.tenant_id == job.tenant_id && p.priority == job.priority &&
           std::tuple(p.submit_ms, p.job_id) > std::tuple(job.submit_ms, job.job_id);
  });
  ForecastOptions asked = options_;
  asked.schedule.explain_job = job.job_id;  // the first cycle's reason of this job only
  size_t kept = 0;
  if (!options_.reference && last && !checkpoints_.empty()) {
    // From the kept run's first state, on its queue with the job put in, jumping over turns.
    ForwardRun run(*checkpoints_.front(), PendingQueue(queue_, job), job, times_, asked, extra);
    kept = RunForward(run, times_, asked, out, open, &turns_, &job, nullptr, nullptr, &checkpoints_,
                      &queue_, jumped);
  } else {
    ClusterSnapshot s = snapshot_;
    s.pending.push_back(job);
    ForwardRun run(std::move(s), times_, asked, extra);
    kept = RunForward(run, times_, asked, out, open,
                      options_.reference || !last ? nullptr : &turns_, &job, nullptr);
  }
  if (replayed) *replayed = kept;
  if (keyed) {
    std::lock_guard<std::mutex> lock(answers_mu_);
    if (answers_.size() < kMaxAnswers) answers_.emplace(key, out[job.job_id]);
  }
  return out[job.job_id];
}

}  // namespace controlplane::service
