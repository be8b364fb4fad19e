// The forward run of the scheduler (forecast.h).
#include "controlplane/service/forecast.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

#include "common/time_util.h"
#include "controlplane/service/pending_queue.h"
#include "controlplane/service/slot_timeline.h"

namespace controlplane::service {

// A kept run's state at the start of one turn (before its decision): what ForwardRun holds
// beside its queue, which is kept as its marks (PendingQueue::taken_marks).
struct PlanCheckpoint {
  size_t turn = 0;
  int cycles = 0;              // Schedule() calls before this turn
  std::vector<int64_t> ended;  // the jobs whose ends led to this turn
  ClusterSnapshot s;           // no pending jobs: the queue holds them
  std::array<std::vector<int64_t>, kSlotKinds> free_hist;
  std::map<std::tuple<int, int, int>, int64_t> shapes;
  std::vector<int64_t> ends;
  std::vector<char> taken;
};

namespace {

constexpr int64_t kNever = SlotTimeline::kForever;
constexpr size_t kMaxReservationsNamed = 3;
// Turns between two saved states of a kept run: an answer replays at most this many turns before
// it reaches a turn it must decide, and a plan holds turns / this many copies of the cluster.
constexpr size_t kCheckpointEvery = 32;

int64_t LimitEnd(int64_t start_ms, int64_t limit_seconds) {
  return limit_seconds > 0 ? start_ms + limit_seconds * 1000 : kNever;
}

// The cluster as the run has moved it: the snapshot, with an expected end per running job.
class ForwardRun {
 public:
  // `extra`: the expected run time (ms) of one more job, beside `times` (a dry run's job).
  ForwardRun(ClusterSnapshot in, const ForecastTimes& times, const ForecastOptions& opt,
             std::optional<std::pair<int64_t, int64_t>> extra = std::nullopt)
      : s_(std::move(in)), times_(times), opt_(opt), extra_run_(extra) {
    if (!opt.reference) queue_ = PendingQueue(s_.pending);
    if (!s_.registered) {  // nodes neither join nor leave: their sizes, once for every cycle
      std::map<std::pair<int, int>, int64_t> sizes;
      for (const SchedNode& n : s_.nodes) sizes[{n.total_cpu, n.total_gpu}] += 1;
      std::vector<NodeShape> shapes;
      for (const auto& [size, count] : sizes) shapes.push_back({size.first, size.second, count});
      s_.registered = std::move(shapes);
    }
    for (size_t i = 0; i < s_.nodes.size(); ++i) {
      node_index_[s_.nodes[i].id] = i;
      Count(s_.nodes[i], +1);
    }
    for (const PendingJob& p : s_.pending) CountShape(p, +1);
    for (size_t i = 0; i < s_.tenants.size(); ++i) tenant_index_[s_.tenants[i].id] = i;
    const int64_t gone = s_.now_ms + std::max<int64_t>(opt.schedule.preempt_grace_ms, 1);
    for (const RunningJob& r : s_.running) {
      auto known = times_.running_end_ms.find(r.job_id);
      int64_t end = known != times_.running_end_ms.end()
                        ? std::min(known->second, LimitEnd(r.start_ms, r.time_limit_seconds))
                        : LimitEnd(r.start_ms, r.time_limit_seconds);
      if (r.preempting) end = std::min(end, gone);
      ends_.push_back(Clamp(end));
    }
  }

  // The state of a kept run saved at `from`, with `job` added to the kept queue it was built
  // from (`queue`: PendingQueue(that queue, job)). Its first decision is over the queue, as
  // every later one.
  ForwardRun(const PlanCheckpoint& from, PendingQueue queue, const PendingJob& job,
             const ForecastTimes& times, const ForecastOptions& opt,
             std::optional<std::pair<int64_t, int64_t>> extra)
      : s_(from.s),
        queue_(std::move(queue)),
        free_hist_(from.free_hist),
        shapes_(from.shapes),
        times_(times),
        opt_(opt),
        extra_run_(extra),
        ends_(from.ends),
        first_over_queue_(true) {
    for (size_t i = 0; i < s_.nodes.size(); ++i) node_index_[s_.nodes[i].id] = i;
    for (size_t i = 0; i < s_.tenants.size(); ++i) tenant_index_[s_.tenants[i].id] = i;
    CountShape(job, +1);
  }

  // This state at the start of `turn`.
  std::unique_ptr<const PlanCheckpoint> Save(size_t turn, int cycles,
                                             const std::vector<int64_t>& ended) const {
    auto c = std::make_unique<PlanCheckpoint>();
    c->turn = turn;
    c->cycles = cycles;
    c->ended = ended;
    c->s.now_ms = s_.now_ms;
    c->s.nodes = s_.nodes;
    c->s.registered = s_.registered;
    c->s.tenants = s_.tenants;
    c->s.running = s_.running;
    c->free_hist = free_hist_;
    c->shapes = shapes_;
    c->ends = ends_;
    c->taken = queue_.taken_marks();
    return c;
  }

  // Back to the kept run's state `c`, with `job` still queued: for a run built by the
  // constructor above from `base` and `job`, while the run has been the kept one.
  void Restore(const PlanCheckpoint& c, const PendingJob& job, const PendingQueue& base) {
    s_.now_ms = c.s.now_ms;
    s_.nodes = c.s.nodes;
    s_.tenants = c.s.tenants;
    s_.running = c.s.running;
    s_.pending.clear();
    free_hist_ = c.free_hist;
    shapes_ = c.shapes;
    CountShape(job, +1);
    ends_ = c.ends;
    queue_.SetTaken(c.taken, base);
  }

  const ClusterSnapshot& snapshot() const { return s_; }
  int64_t now() const { return s_.now_ms; }

  // The scheduler's decision now: Schedule() over the snapshot in the first cycle and in the
  // reference run, else over the kept queue (ScheduleQueue: no copy, no sort, and without
  // reasons it stops where the rest of the queue can change nothing).
  ScheduleDecision Decide(bool first, const ScheduleOptions& options) {
    if ((first && !first_over_queue_) || opt_.reference) return Schedule(s_, options);
    return ScheduleQueue(s_, queue_, options);
  }

  // Starts what `d` placed, `delay_ms` from now (holding the slots from now), and lets its
  // victims go.
  void Apply(const ScheduleDecision& d, int64_t delay_ms) {
    if (d.placements.empty() && d.preemptions.empty()) {
      if (!opt_.reference) s_.pending.clear();  // from here on the queue holds them
      return;
    }
    // The placed jobs, in placement order: from the queue, or (in the first cycle and the
    // reference run) from the snapshot's pending jobs.
    std::vector<const PendingJob*> pending(d.placements.size(), nullptr);
    if (opt_.reference || !s_.pending.empty()) {
      std::unordered_map<int64_t, size_t> at;
      for (size_t i = 0; i < d.placements.size(); ++i) at[d.placements[i].job_id] = i;
      for (const PendingJob& p : s_.pending) {
        if (auto it = at.find(p.job_id); it != at.end()) pending[it->second] = &p;
      }
    } else {
      for (size_t i = 0; i < d.placements.size(); ++i) {
        pending[i] = queue_.Find(d.placements[i].job_id);
      }
    }
    std::vector<int64_t> placed;
    std::vector<RunningJob> started;
    std::vector<int64_t> started_ends;
    started.reserve(d.placements.size());
    started_ends.reserve(d.placements.size());
    const int64_t start = s_.now_ms + delay_ms;
    for (size_t i = 0; i < d.placements.size(); ++i) {
      const Placement& pl = d.placements[i];
      if (!pending[i]) throw std::out_of_range("a placed job is not pending");
      const PendingJob& p = *pending[i];
      RunningJob r{p.job_id, p.tenant_id, p.priority, start, p.time_limit_seconds,
                   pl.slot_type, pl.nodes, false};
      Hold(r, +1);
      CountShape(p, -1);
      int64_t end = LimitEnd(start, p.time_limit_seconds);
      if (extra_run_ && extra_run_->first == p.job_id) {
        end = std::min(end, start + extra_run_->second);
      } else if (auto run = times_.run_ms.find(p.job_id); run != times_.run_ms.end()) {
        end = std::min(end, start + run->second);
      }
      started.push_back(std::move(r));
      started_ends.push_back(Clamp(end));
      placed.push_back(p.job_id);
    }
    std::sort(placed.begin(), placed.end());
    const int64_t gone = s_.now_ms + std::max<int64_t>(opt_.schedule.preempt_grace_ms, 1);
    for (const Preemption& pre : d.preemptions) {
      for (int64_t victim : pre.victims) {
        for (size_t i = 0; i < s_.running.size(); ++i) {
          if (s_.running[i].job_id != victim) continue;
          s_.running[i].preempting = true;
          ends_[i] = std::min(ends_[i], gone);
        }
      }
    }
    if (opt_.reference) {
      std::erase_if(s_.pending, [&](const PendingJob& p) {
        return std::binary_search(placed.begin(), placed.end(), p.job_id);
      });
    } else {
      s_.pending.clear();  // from here on the queue holds them
      for (int64_t id : placed) queue_.Take(id);
    }
    for (size_t i = 0; i < started.size(); ++i) {
      s_.running.push_back(std::move(started[i]));
      ends_.push_back(started_ends[i]);
    }
  }

  // Jumps to the next expected end and frees what ends then; false when nothing is expected to
  // end. `ended` gets the jobs that did.
  bool Advance(std::vector<int64_t>* ended) {
    int64_t next = kNever;
    for (int64_t e : ends_) next = std::min(next, e);
    if (next == kNever) return false;
    s_.now_ms = next;
    ended->clear();
    size_t kept = 0;
    for (size_t i = 0; i < s_.running.size(); ++i) {
      if (ends_[i] <= next) {
        Hold(s_.running[i], -1);
        ended->push_back(s_.running[i].job_id);
        continue;
      }
      if (kept != i) {
        s_.running[kept] = std::move(s_.running[i]);
        ends_[kept] = ends_[i];
      }
      ++kept;
    }
    s_.running.resize(kept);
    ends_.resize(kept);
    return true;
  }

  // False when Schedule() now could place nothing: no pending job's shape fits on the free
  // slots of the nodes that take jobs, before reservations and quotas. Preemption frees slots
  // that are not free, so with it on anything may change.
  bool MayPlace() const {
    if (opt_.schedule.preempt_min_priority) return true;
    for (const auto& [shape, count] : shapes_) {
      const auto [kind, slots, nodes] = shape;
      const std::vector<int64_t>& hist = free_hist_[kind];
      int64_t fit = 0;
      for (size_t f = std::max(slots, 0); f < hist.size() && fit < nodes; ++f) fit += hist[f];
      if (fit >= nodes) return true;
    }
    return false;
  }

  // The expected end of a job the run has started, if it is still running.
  std::optional<int64_t> EndOf(int64_t job_id) const {
    for (size_t i = 0; i < s_.running.size(); ++i) {
      if (s_.running[i].job_id == job_id) {
        return ends_[i] == kNever ? std::nullopt : std::optional<int64_t>(ends_[i]);
      }
    }
    return std::nullopt;
  }

 private:
  int64_t Clamp(int64_t end) const { return end == kNever ? kNever : std::max(end, s_.now_ms + 1); }

  // Takes (+1) or gives back (-1) a running job's slots on its nodes and in its tenant's counts.
  void Hold(const RunningJob& r, int sign) {
    int64_t slots = 0;
    for (const NodeShare& n : r.nodes) {
      slots += n.slots;
      auto it = node_index_.find(n.node_id);
      if (it == node_index_.end()) continue;
      SchedNode& node = s_.nodes[it->second];
      Count(node, -1);
      (r.slot_type == "gpu" ? node.free_gpu : node.free_cpu) -= sign * n.slots;
      Count(node, +1);
    }
    auto t = tenant_index_.find(r.tenant_id);
    if (t != tenant_index_.end()) {
      s_.tenants[t->second].slots_in_use += sign * slots;
      s_.tenants[t->second].running_jobs += sign;
    }
  }

  // Adds (+1) or removes (-1) a node that takes jobs in the histogram of free slots, as the
  // scheduler's FitNow counts them (clamped to the node's size).
  void Count(const SchedNode& n, int sign) {
    if (n.draining) return;
    const std::array<int, kSlotKinds> total{n.total_cpu, n.total_gpu};
    const std::array<int, kSlotKinds> free{n.free_cpu, n.free_gpu};
    for (int k = 0; k < kSlotKinds; ++k) {
      if (total[k] <= 0) continue;
      std::vector<int64_t>& hist = free_hist_[k];
      if (hist.size() < static_cast<size_t>(total[k]) + 1) hist.resize(total[k] + 1, 0);
      hist[std::clamp(free[k], 0, total[k])] += sign;
    }
  }

  void CountShape(const PendingJob& p, int sign) {
    const int kind = SlotKindOf(p.resources.slot_type);
    if (kind < 0) return;
    auto key = std::make_tuple(kind, p.resources.SlotsPerNode(), p.resources.nodes);
    if ((shapes_[key] += sign) == 0) shapes_.erase(key);
  }

  // pending: every job left in the reference run; otherwise only until the first Apply
  ClusterSnapshot s_;
  PendingQueue queue_;  // the pending jobs left, outside the reference run
  std::array<std::vector<int64_t>, kSlotKinds> free_hist_;  // usable nodes by free slots
  std::map<std::tuple<int, int, int>, int64_t> shapes_;     // pending (kind, slots, nodes)
  const ForecastTimes& times_;
  const ForecastOptions& opt_;
  const std::optional<std::pair<int64_t, int64_t>> extra_run_;
  std::vector<int64_t> ends_;  // parallel to s_.running; kNever: not expected to end
  std::unordered_map<int64_t, size_t> node_index_, tenant_index_;
  // The first decision over queue_ rather than s_.pending (a run started from a checkpoint).
  bool first_over_queue_ = false;
};

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
