#include "engine/rl/async_ppo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "common/time_util.h"
#include "engine/dist/agree_on_stop.h"
#include "engine/eval/periodic_eval.h"
#include "engine/model/policy_options.h"
#include "engine/policy/rl_checkpoint.h"
#include "engine/rl/async_actors.h"
#include "engine/rl/gaussian.h"
#include "engine/rl/rollout_ranks.h"

namespace engine::rl {
namespace {

using Clock = std::chrono::steady_clock;

// Segments of `envs` environments (sorted by environment) as one (T, envs) rollout.
Rollout ToRollout(std::vector<Segment>& segs, int T, int A, int64_t version,
                  std::vector<PolicySample>* last_obs, std::vector<int64_t>* versions) {
  std::sort(segs.begin(), segs.end(),
            [](const Segment& a, const Segment& b) { return a.env < b.env; });
  const int N = static_cast<int>(segs.size());
  Rollout r;
  r.policy_version = version;
  r.steps = T;
  r.envs = N;
  r.action_dim = A;
  const size_t n = static_cast<size_t>(T) * N;
  r.obs.resize(n);
  r.actions.resize(n * A);
  r.behaviour_logp.resize(n);
  r.values.resize(n);
  r.rewards.resize(n);
  r.dones.resize(n);
  versions->resize(n);
  last_obs->clear();
  for (int e = 0; e < N; ++e) {
    Segment& s = segs[e];
    for (int t = 0; t < T; ++t) {
      const size_t i = static_cast<size_t>(t) * N + e;
      r.obs[i] = std::move(s.obs[t]);
      std::copy_n(s.actions.data() + static_cast<size_t>(t) * A, A, r.actions.data() + i * A);
      r.behaviour_logp[i] = s.behaviour_logp[t];
      r.values[i] = s.values[t];
      r.rewards[i] = s.rewards[t];
      r.dones[i] = s.dones[t];
      (*versions)[i] = s.versions[t];
    }
    last_obs->push_back(std::move(s.last_obs));
  }
  return r;
}

// What one update saw of its trajectories.
struct Tally {
  double episodes = 0, successes = 0, returns = 0;
  std::vector<double> staleness;  // steps per versions behind, 0..η

  void Add(const std::vector<Segment>& segs, int64_t version) {
    for (const Segment& s : segs) {
      episodes += s.episodes;
      successes += s.successes;
      returns += s.returns;
      for (int64_t v : s.versions) {
        // The gate makes version − v ≤ η; a larger one would be a bug the tests catch.
        const size_t behind = static_cast<size_t>(std::max<int64_t>(0, version - v));
        if (behind >= staleness.size()) staleness.resize(behind + 1, 0.0);
        staleness[behind] += 1;
      }
    }
  }
};

// The mean staleness of `versions` learned at `version`, over every rank (the same on all, so
// their optimiser steps stay equal).
double MeanStaleness(const std::vector<int64_t>& versions, int64_t version, Communicator& comm) {
  double sum = 0;
  for (int64_t v : versions) sum += static_cast<double>(version - v);
  const double count = comm.AllreduceSum(static_cast<double>(versions.size()));
  return count > 0 ? comm.AllreduceSum(sum) / count : 0.0;
}

}  // namespace

double StaleLearningRate(double lr, double scale, double mean_staleness) {
  return lr * std::pow(scale, mean_staleness);
}

common::Result<SyncPpoResult> RunAsyncPpo(const SyncPpoOptions& options, Communicator& comm,
                                          EventSink* events) {
  const api::RlOptions& rl = options.engine.rl;
  EMBODY_ASSIGN_OR_RETURN(config, PolicyConfigFromOptions(options.engine));
  EMBODY_ASSIGN_OR_RETURN(policy, MakeRlPolicy(options, config, comm));
  EMBODY_ASSIGN_OR_RETURN(periodic_eval, eval::PeriodicEval::ForRl(options.engine));
  const int T = rl.rollout_steps, A = config.action_dim;
  const int eta = rl.disaggregated ? rl.max_staleness : 0;
  const double stale_lr_scale = rl.disaggregated ? rl.stale_lr_scale : 1.0;
  const bool remote = rl.disaggregated && rl.rollout_ranks > 0;
  RolloutLayout layout;
  if (remote) {
    EMBODY_ASSIGN_OR_RETURN(l, RolloutLayout::For(comm.world_size(), rl.rollout_ranks));
    layout = l;
  }
  // The ranks that act: every rank, or the rollout ranks.
  const int acting_ranks = remote ? layout.rollout_ranks : comm.world_size();
  const int64_t per_update = static_cast<int64_t>(rl.envs) * T * acting_ranks;
  const int64_t total_updates = (rl.total_env_steps + per_update - 1) / per_update;
  // The learners' communicator: the world, or the learners split from the rollout ranks.
  std::unique_ptr<Communicator> split;
  if (remote) split = comm.Split(layout.IsLearner(comm.rank()) ? 0 : 1);
  if (remote && !layout.IsLearner(comm.rank())) {
    return RunRolloutRank(options, *policy, comm, layout, total_updates);
  }
  Communicator& learners = remote ? *split : comm;
  // Segments per update on this learner.
  const int N = remote ? rl.envs * layout.per_learner : rl.envs;
  const PpoConfig ppo = PpoConfigFromOptions(rl);
  PpoLearner learner(policy.get(), ppo, &learners, options.engine.seed);

  PolicyStore store(*policy);
  std::unique_ptr<Acting> acting;
  if (remote) {
    acting = std::make_unique<RolloutRanks>(comm, layout, rl.envs, total_updates);
  } else {
    ActorSetup setup;
    setup.engine = options.engine;
    setup.policy = config;
    setup.rank = comm.rank();
    setup.max_staleness = eta;
    setup.store = &store;
    setup.batches = total_updates;
    EMBODY_ASSIGN_OR_RETURN(local, ThreadActing::Start(setup, rl.env_async));
    acting = std::move(local);
  }

  SyncPpoResult result;
  int64_t env_steps = 0;
  int64_t actor_wait_ns = 0, last_inferences = 0, last_inferred = 0;
  Clock::time_point last = Clock::now();
  std::vector<PolicySample> last_obs;
  std::vector<int64_t> versions;
  std::vector<float> proximal_logp, values;
  // Level 3: the policy as the update began, which evaluates the streamed micro-batches.
  std::unique_ptr<ActorCritic> start;
  int64_t start_version = -1;
  if (rl.streaming) {
    EMBODY_ASSIGN_OR_RETURN(copy, ActorCritic::Create(config, options.engine.seed,
                                                      static_cast<float>(rl.init_log_std)));
    start = std::move(copy);
  }
  // This learner's stop vote: its own flag, or one of its rollout ranks asked (their flags reach
  // it as messages). The learners agree on it (agree_on_stop.h): one that left alone would leave
  // the others in the next update's gradient all-reduce.
  auto stop_here = [&] { return Raised(options.stop_requested) || acting->stop_requested(); };
  bool stop = AgreeOnStop(stop_here(), learners);
  for (int64_t version = 0; version < total_updates; ++version) {
    if (stop) {
      result.stopped = true;
      break;
    }
    const int64_t depth = acting->depth();
    double waited = 0;  // the learner, for trajectories
    Tally tally;
    tally.staleness.assign(eta + 1, 0.0);
    PpoStats stats;
    if (!rl.streaming) {
      const Clock::time_point w0 = Clock::now();
      auto taken = acting->Take(version, N);
      if (!taken.ok()) return taken.status();
      std::vector<Segment>& segs = *taken;
      waited += common::SecondsBetween(w0, Clock::now());
      tally.Add(segs, version);
      Rollout r = ToRollout(segs, T, A, version, &last_obs, &versions);
      const bool stale =
          std::any_of(versions.begin(), versions.end(), [&](int64_t v) { return v != version; });
      if (stale) {
        // Decoupled PPO: π_prox is the learner's policy now; the critic's values are too.
        EMBODY_RETURN_IF_ERROR(learner.Evaluate(r.obs, r.actions.data(), &proximal_logp, &values));
        r.values = values;
      }
      EMBODY_RETURN_IF_ERROR(policy->Forward(last_obs));
      r.last_values.assign(policy->value(), policy->value() + N);
      PpoBatch batch;
      AppendRollout(std::move(r), ppo, &batch);
      if (stale && !ppo.proximal_behaviour) batch.proximal_logp = proximal_logp;
      batch.policy_version = versions;
      learner.set_lr(
          StaleLearningRate(ppo.lr, stale_lr_scale, MeanStaleness(versions, version, learners)));
      EMBODY_ASSIGN_OR_RETURN(s, learner.Update(batch));
      stats = s;
      // The lag of the behaviour policies behind the learner's, whichever π_prox was used
      // (every rank calls it: it all-reduces).
      BehaviourStats(stale ? proximal_logp.data() : batch.behaviour_logp.data(),
                     batch.behaviour_logp.data(), batch.size(), ppo.importance_cap, &learners,
                     &stats);
    } else {
      // The first epoch streams: trajectories in order of arrival; the rollout's N make
      // `minibatches` global batches (PPO's minibatches, one optimiser step each), each taken in
      // `micro_batches` micro-batches. The other epochs − 1 run once the rollout is in.
      const int G = std::min(ppo.minibatches, N);
      PpoBatch learned;
      PpoStats streamed;  // means over the G streamed steps
      streamed.importance_weight = 0;
      std::vector<int64_t> global_versions, rollout_versions;
      for (int g = 0; g < G; ++g) {
        const int in_global = (g + 1) * N / G - g * N / G;
        const int M = std::min(rl.micro_batches, in_global);
        const double weight = 1.0 / (static_cast<double>(in_global) * T);
        global_versions.clear();
        for (int m = 0; m < M; ++m) {
          const int count = (m + 1) * in_global / M - m * in_global / M;
          const Clock::time_point w0 = Clock::now();
          auto taken = acting->Take(version, count);
          if (!taken.ok()) return taken.status();
          std::vector<Segment>& segs = *taken;
          waited += common::SecondsBetween(w0, Clock::now());
          tally.Add(segs, version);
          Rollout r = ToRollout(segs, T, A, version, &last_obs, &versions);
          global_versions.insert(global_versions.end(), versions.begin(), versions.end());
          rollout_versions.insert(rollout_versions.end(), versions.begin(), versions.end());
          // Evaluated as the non-streaming learner evaluates its rollout: by the policy as the
          // update began (the store's version `version`), not the one this update has moved.
          start_version = store.Refresh(start_version, start.get());
          EMBODY_RETURN_IF_ERROR(
              EvaluatePolicy(*start, r.obs, r.actions.data(), &proximal_logp, &r.values));
          EMBODY_RETURN_IF_ERROR(start->Forward(last_obs));
          r.last_values.assign(start->value(), start->value() + r.envs);
          EMBODY_RETURN_IF_ERROR(
              learner.AccumulateStreaming(std::move(r), proximal_logp, weight, N * T, &learned));
        }
        // The global batch's step at the learning rate of its own steps' staleness.
        learner.set_lr(StaleLearningRate(ppo.lr, stale_lr_scale,
                                         MeanStaleness(global_versions, version, learners)));
        EMBODY_ASSIGN_OR_RETURN(s, learner.StepAccumulated());
        streamed.policy_loss += s.policy_loss / G;
        streamed.value_loss += s.value_loss / G;
        streamed.grad_norm += s.grad_norm / G;
        streamed.behaviour_kl += s.behaviour_kl / G;
        streamed.importance_capped += s.importance_capped / G;
        streamed.importance_weight += s.importance_weight / G;
      }
      if (ppo.epochs > 1) {
        learner.set_lr(StaleLearningRate(ppo.lr, stale_lr_scale,
                                         MeanStaleness(rollout_versions, version, learners)));
        EMBODY_ASSIGN_OR_RETURN(s, learner.Update(learned, ppo.epochs - 1));
        stats = s;
        stats.minibatches += G;
      } else {
        stats = streamed;
        stats.entropy = GaussianEntropy(policy->log_std(), A);
        stats.minibatches = G;
      }
      // The lag as the streamed pass measured it against the learner's policy (the later epochs'
      // π_prox is the behaviour policy by default, against which there is no lag to see).
      stats.behaviour_kl = streamed.behaviour_kl;
      stats.importance_capped = streamed.importance_capped;
      stats.importance_weight = streamed.importance_weight;
    }
    // The actors' counters are read before the new version goes out: with level 1 off the next
    // rollout's inferences start on the publish, and read after it some could be counted in this
    // update (under load, all of them, leaving the next update none).
    const ActorTotals totals = acting->totals();
    const int64_t wait_ns = totals.wait_ns;
    const int64_t inferences = totals.inferences, inferred = totals.inferred;
    store.Publish(*policy, version + 1);
    acting->Publish(*policy, version + 1);
    const Clock::time_point now = Clock::now();
    const double own_seconds = common::SecondsBetween(last, now);
    last = now;

    env_steps += per_update;
    UpdateRecord rec;
    rec.env_steps = env_steps;
    // The learners' stop votes travel with the episode count.
    const SumAndStop counted = AllreduceSumAndStop(tally.episodes, stop_here(), learners);
    rec.episodes = static_cast<int64_t>(counted.sum);
    stop = counted.stop;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    rec.mean_return = rec.episodes > 0 ? learners.AllreduceSum(tally.returns) / rec.episodes : nan;
    rec.success_rate =
        rec.episodes > 0 ? learners.AllreduceSum(tally.successes) / rec.episodes : nan;
    const double seconds = learners.AllreduceMax(own_seconds);
    rec.env_steps_per_s = per_update / seconds;
    rec.trajectories_per_s = static_cast<double>(N) * learners.world_size() / seconds;
    rec.ppo = stats;
    double staleness_sum = 0, steps = 0;
    for (size_t b = 0; b < tally.staleness.size(); ++b) {
      // Every rank's histogram has η + 1 buckets (more only on a gate bug, which max reports).
      const double count = b <= static_cast<size_t>(eta) ? learners.AllreduceSum(tally.staleness[b])
                                                         : tally.staleness[b];
      rec.staleness.push_back(static_cast<int64_t>(count));
      if (count > 0) rec.max_staleness = static_cast<int64_t>(b);
      staleness_sum += count * b;
      steps += count;
    }
    rec.max_staleness =
        static_cast<int64_t>(learners.AllreduceMax(static_cast<double>(rec.max_staleness)));
    rec.mean_staleness = steps > 0 ? staleness_sum / steps : 0.0;
    rec.queue_depth = static_cast<int64_t>(learners.AllreduceSum(static_cast<double>(depth)));
    const double actor_idle = totals.env_threads > 0
                                  ? 1e-9 * static_cast<double>(wait_ns - actor_wait_ns) /
                                        (totals.env_threads * own_seconds)
                                  : 0.0;
    actor_wait_ns = wait_ns;
    rec.inference_batch = inferences > last_inferences
                              ? static_cast<double>(inferred - last_inferred) /
                                    static_cast<double>(inferences - last_inferences)
                              : 0.0;
    last_inferences = inferences;
    last_inferred = inferred;
    rec.actor_idle_share =
        std::clamp(learners.AllreduceSum(actor_idle) / learners.world_size(), 0.0, 1.0);
    rec.learner_idle_share =
        std::clamp(learners.AllreduceSum(waited / own_seconds) / learners.world_size(), 0.0, 1.0);
    result.updates.push_back(rec);
    if (events != nullptr && learners.rank() == 0) {
      nlohmann::json ev = RlStepEvent(rec, version + 1, total_updates, learner.lr(), waited,
                                      own_seconds - waited, seconds, comm.world_size());
      nlohmann::json hist = nlohmann::json::object();
      for (size_t b = 0; b < rec.staleness.size(); ++b) hist[std::to_string(b)] = rec.staleness[b];
      ev["trajectories_per_s"] = rec.trajectories_per_s;
      ev["staleness"] = hist;
      ev["staleness_mean"] = rec.mean_staleness;
      ev["staleness_max"] = rec.max_staleness;
      ev["queue_depth"] = rec.queue_depth;
      ev["actor_idle_share"] = rec.actor_idle_share;
      ev["learner_idle_share"] = rec.learner_idle_share;
      ev["inference_batch"] = rec.inference_batch;
      // The share of the update's steps whose importance weight ρ = π_learner / π_behaviour went
      // over importance_cap (ppo.h's BehaviourStats; 0 on fresh data).
      ev["importance_capped"] = rec.ppo.importance_capped;
      if (remote) ev["rollout_ranks"] = layout.rollout_ranks;
      if (periodic_eval.Due(version + 1)) EMBODY_RETURN_IF_ERROR(periodic_eval.Run(*policy, &ev));
      events->Post(std::move(ev));
    }
  }
  if (learners.rank() == 0 && !options.checkpoint_dir.empty()) {
    EMBODY_ASSIGN_OR_RETURN(
        path, SaveRlPolicy(options.checkpoint_dir, *policy, options.engine,
                           static_cast<int64_t>(result.updates.size()), comm.world_size(), events));
    result.checkpoint = path;
  }
  result.final_heads = policy->heads();
  return result;
}

}  // namespace engine::rl
