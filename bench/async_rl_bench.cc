// Asynchronous RL in three levels (docs/rl.md) against the synchronous loop: the same reach task,
// policy, seed, ranks (one, or as mpirun starts it), environments in all (--envs, spread over
// the ranks that act) and heterogeneous step-latency model (engine.rl.env_latency,
// sleep mode: the environments stand in for simulators served elsewhere), run one after another
// for the same number of env steps:
//   sync        RunSyncPpo: every step waits for the slowest environment, acting waits for
//               every update
//   +L1         disaggregated: acting goes on while the learner updates (η = --eta)
//   +L1+L2      and every environment steps on its own, inference batched
//   +L1+L2+L3   and the learner streams its first epoch in micro-batches
//   L2 alone    level 2 without level 1 (η = 0: acting waits for every update, on-policy)
//   +L1(ranks)… with 2+ ranks: the same levels with level 1's actors on ranks of their own
//               (engine.rl.disaggregated.rollout_ranks, --rollout-ranks, half the ranks by
//               default): `mpirun -np 2 async_rl_bench` compares 2 colocated ranks with 1
//               learner + 1 rollout rank, the same environments in all
// Prints env steps/s and its ratio over sync, trajectories/s, the staleness seen and what the
// learner saw of it (KL between the behaviour and learner policies, the share of importance
// weights over the cap, PPO's approx_kl and clip fraction), and success:
// the final policy's Gaussian mean evaluated on --eval-episodes seeded episodes (the same
// episodes for every configuration), and the training episodes' rate over the last 5 updates;
// with --seeds S, every configuration runs S seeds and success is their mean (one seed of a
// short run varies by tens of points), with the standard deviation over seeds and, paired by
// seed, the mean difference from sync and its standard error (sd of the differences / √S).
// Last line: one JSON object.
//
//   async_rl_bench [--seeds 3] [--updates 60] [--mean-ms 2] [--tail-p 0.05] [--tail-scale 8] [--eta
//   1] [--proximal behaviour|current] [--stale-lr-scale 0.25] [--configs sync,+L1+L2] [--trace]
// --configs runs a subset (quick comparisons of learning; ratios need sync), --trace prints every
// update's statistics; --lr, --epochs and --importance-cap change every configuration.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <mpi.h>

#include "engine/dist/communicator.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/report/recording_sink.h"
#include "engine/rl/async_ppo.h"
#include "engine/rl/sync_ppo.h"
#include "engine/testing/small_reach.h"

namespace {

struct Config {
  const char* name;
  bool disaggregated, env_async, streaming;
  bool rollout_ranks = false;  // level 1's actors on ranks of their own (needs 2+ ranks)
};

struct Outcome {
  double seconds = 0, env_steps_per_s = 0, trajectories_per_s = 0;
  double eval_success = NAN, train_success = NAN, mean_staleness = 0;
  // Means over updates and seeds: the learner's view of how stale its data was.
  double behaviour_kl = 0, importance_capped = 0, approx_kl = 0, clip_fraction = 0;
  int64_t env_steps = 0, max_staleness = 0;
};

double LastSuccess(const std::vector<engine::rl::UpdateRecord>& u, size_t k) {
  double s = 0;
  int n = 0;
  for (size_t i = u.size() > k ? u.size() - k : 0; i < u.size(); ++i) {
    if (std::isfinite(u[i].success_rate)) {
      s += u[i].success_rate;
      ++n;
    }
  }
  return n > 0 ? s / n : NAN;
}

struct Spread {
  int n = 0;
  double mean = NAN, sd = NAN, se = NAN;
};

// Mean, sample standard deviation and standard error of the mean of x.
Spread SpreadOf(const std::vector<double>& x) {
  Spread s;
  s.n = static_cast<int>(x.size());
  if (s.n == 0) return s;
  double sum = 0, sq = 0;
  for (double v : x) sum += v;
  s.mean = sum / s.n;
  for (double v : x) sq += (v - s.mean) * (v - s.mean);
  s.sd = s.n > 1 ? std::sqrt(sq / (s.n - 1)) : 0.0;
  s.se = s.sd / std::sqrt(static_cast<double>(s.n));
  return s;
}

// x − y seed by seed, where both ran (empty otherwise).
std::vector<double> Differences(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> d;
  if (x.size() != y.size()) return d;
  for (size_t i = 0; i < x.size(); ++i) d.push_back(x[i] - y[i]);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  struct Finalize {
    ~Finalize() { MPI_Finalize(); }
  } finalize;
  engine::MpiCommunicator world;
  const int W = world.world_size();
  const bool root = world.rank() == 0;
  CLI::App app("asynchronous RL levels vs the synchronous loop (env steps/s, success)");
  int updates = 60, envs = 16, rollout = 32, eta = 1, micro = 4, episodes = 200;
  double mean_ms = 2.0, jitter = 0.5, tail_p = 0.05, tail_alpha = 2.0, tail_scale = 8.0;
  double max_wait_ms = 1.0;
  uint64_t seed = 1;
  int seeds = 1;
  std::vector<std::string> only;
  bool trace = false;
  std::string proximal = api::RlOptions{}.proximal;
  double importance_cap = api::RlOptions{}.importance_cap;
  double stale_lr_scale = api::RlOptions{}.stale_lr_scale;
  double lr = engine::testing::SmallReach(1).engine.rl.lr;
  int epochs = api::RlOptions{}.epochs;
  app.add_option("--updates", updates, "PPO updates (global batches) per configuration");
  app.add_option("--envs", envs,
                 "environments in all: envs / ranks on each rank, or envs / rollout ranks on each "
                 "rollout rank");
  int rollout_ranks = W / 2;
  app.add_option("--rollout-ranks", rollout_ranks,
                 "ranks that act in the (ranks) configurations (default: half of them)");
  app.add_option("--rollout-steps", rollout, "steps per environment per global batch");
  app.add_option("--eta", eta, "maximum staleness (level 1)");
  app.add_option("--micro-batches", micro, "micro-batches per global batch (level 3)");
  app.add_option("--max-wait-ms", max_wait_ms, "inference deadline (level 2)");
  app.add_option("--mean-ms", mean_ms, "step latency: body mean");
  app.add_option("--jitter", jitter, "step latency: body coefficient of variation");
  app.add_option("--tail-p", tail_p, "step latency: stall probability");
  app.add_option("--tail-alpha", tail_alpha, "step latency: stall Pareto shape");
  app.add_option("--tail-scale", tail_scale, "step latency: stall minimum / mean");
  app.add_option("--eval-episodes", episodes, "episodes evaluating each final policy");
  app.add_option("--seed", seed, "first seed");
  app.add_option("--seeds", seeds, "seeds run per configuration (seed, seed + 1, ...)");
  app.add_option("--configs", only,
                 "run only these configurations (names as printed; ratios need sync)")
      ->delimiter(',');
  app.add_option("--proximal", proximal, "level 1's proximal policy: current or behaviour");
  app.add_option("--importance-cap", importance_cap, "decoupled PPO's cap on π_prox / π_b");
  app.add_option("--stale-lr-scale", stale_lr_scale,
                 "level 1: lr times this to the power of the batch's mean staleness");
  app.add_option("--lr", lr, "PPO learning rate (every configuration)");
  app.add_option("--epochs", epochs, "PPO epochs per rollout (every configuration)");
  app.add_flag("--trace", trace, "every update's success and PPO statistics, to stderr");
  CLI11_PARSE(app, argc, argv);
  if (envs % W != 0 || (W > 1 && (rollout_ranks < 1 || envs % rollout_ranks != 0))) {
    if (root) std::fprintf(stderr, "--envs %d must divide over %d ranks and the rollout ranks\n",
                           envs, W);
    return 2;
  }

  std::vector<Config> configs = {{"sync", false, false, false},
                                 {"+L1", true, false, false},
                                 {"+L1+L2", true, true, false},
                                 {"+L1+L2+L3", true, true, true},
                                 // Level 2 without level 1: acting stays on-policy.
                                 {"L2 alone", false, true, false}};
  if (W > 1) {
    configs.push_back({"+L1(ranks)", true, false, false, true});
    configs.push_back({"+L1(ranks)+L2", true, true, false, true});
    configs.push_back({"+L1(ranks)+L2+L3", true, true, true, true});
  }
  std::vector<Outcome> out(configs.size());
  std::vector<std::vector<double>> evals(configs.size());
  for (int k = 0; k < seeds; ++k) {
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& c = configs[ci];
      if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
      engine::rl::SyncPpoOptions o =
          engine::testing::SmallReach(static_cast<int64_t>(envs) * rollout * updates);
      api::RlOptions& rl = o.engine.rl;
      o.engine.seed = seed + k;
      rl.envs = c.rollout_ranks ? envs / rollout_ranks : envs / W;
      rl.rollout_ranks = c.rollout_ranks ? rollout_ranks : 0;
      rl.rollout_steps = rollout;
      rl.env_latency.mean_ms = mean_ms;
      rl.env_latency.jitter = jitter;
      rl.env_latency.tail_probability = tail_p;
      rl.env_latency.tail_alpha = tail_alpha;
      rl.env_latency.tail_scale = tail_scale;
      rl.disaggregated = c.disaggregated;
      rl.max_staleness = eta;
      rl.proximal = proximal;
      rl.importance_cap = importance_cap;
      rl.lr = lr;
      rl.stale_lr_scale = stale_lr_scale;
      rl.epochs = epochs;
      rl.env_async = c.env_async;
      rl.max_wait_ms = max_wait_ms;
      rl.streaming = c.streaming;
      rl.micro_batches = micro;
      o.engine.eval_every = updates;  // the final policy, once
      o.engine.eval_episodes = episodes;
      engine::Communicator& comm = world;
      engine::RecordingSink sink;
      const auto t0 = std::chrono::steady_clock::now();
      auto r = rl.any_async() ? engine::rl::RunAsyncPpo(o, comm, &sink)
                              : engine::rl::RunSyncPpo(o, comm, &sink);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.name, r.status().ToString().c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (!root) continue;  // rank 0 learns in every configuration and reports
      // Sums over seeds; divided below.
      Outcome& x = out[ci];
      x.env_steps += r->updates.back().env_steps;
      // The loop's time, update by update: neither set-up nor the final evaluation counts.
      for (const auto& u : r->updates)
        x.seconds += static_cast<double>(envs) * rollout / u.env_steps_per_s;  // envs in all
      double eval = NAN;
      for (const nlohmann::json& ev : sink.events()) {
        if (ev.contains("eval_success_rate") && ev["eval_success_rate"].is_number()) {
          eval = ev["eval_success_rate"].get<double>();
        }
      }
      evals[ci].push_back(eval);
      x.train_success = (k == 0 ? 0.0 : x.train_success) + LastSuccess(r->updates, 5) / seeds;
      x.eval_success = (k == 0 ? 0.0 : x.eval_success) + eval / seeds;
      for (size_t i = 0; trace && i < r->updates.size(); ++i) {
        const auto& u = r->updates[i];
        std::fprintf(stderr,
                     "  %s update %zu: success %.3f staleness %.2f kl_b %.4f capped %.3f w %.3f "
                     "kl_upd %.4f clipped %.3f entropy %.3f grad %.3f vloss %.4f\n",
                     c.name, i, u.success_rate, u.mean_staleness, u.ppo.behaviour_kl,
                     u.ppo.importance_capped, u.ppo.importance_weight, u.ppo.approx_kl,
                     u.ppo.clip_fraction, u.ppo.entropy, u.ppo.grad_norm, u.ppo.value_loss);
      }
      for (const auto& u : r->updates) {
        const double share = 1.0 / r->updates.size() / seeds;
        x.mean_staleness += u.mean_staleness * share;
        x.behaviour_kl += u.ppo.behaviour_kl * share;
        x.importance_capped += u.ppo.importance_capped * share;
        x.approx_kl += u.ppo.approx_kl * share;
        x.clip_fraction += u.ppo.clip_fraction * share;
        x.max_staleness = std::max(x.max_staleness, u.max_staleness);
      }
      std::fprintf(stderr, "seed %llu %s: %.1f s, eval success %.3f\n",
                   static_cast<unsigned long long>(seed + k), c.name, seconds, eval);
    }
  }
  if (!root) return 0;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    Outcome& x = out[ci];
    x.env_steps_per_s = x.env_steps / x.seconds;
    x.trajectories_per_s = x.env_steps_per_s / rollout;
  }

  std::printf(
      "reach, %d rank(s) (%d rollout ranks in the (ranks) configurations), %d seed(s), %d envs "
      "in all x %d steps x %d updates, latency mean %.1f ms jitter %.2f, stall p %.3f alpha %.1f "
      "scale %.1f (sleep), eta %d, %d micro-batches\n",
      W, W > 1 ? rollout_ranks : 0, seeds, envs, rollout, updates, mean_ms, jitter, tail_p,
      tail_alpha, tail_scale, eta, micro);
  std::printf("%-16s %10s %9s %8s %9s %10s %10s %9s %9s %8s %7s %8s %7s\n", "config", "env_steps",
              "seconds", "steps/s", "vs sync", "traj/s", "staleness", "eval_succ", "train_succ",
              "kl_b", "capped", "kl_upd", "clipped");
  nlohmann::json j = {
      {"bench", "async_rl"}, {"ranks", W}, {"rollout_ranks", W > 1 ? rollout_ranks : 0},
      {"seeds", seeds},           {"updates", updates},
      {"envs", envs},        {"rollout_steps", rollout}, {"eta", eta},
      {"mean_ms", mean_ms},  {"tail_p", tail_p},         {"tail_scale", tail_scale}};
  for (size_t i = 0; i < configs.size(); ++i) {
    const Outcome& x = out[i];
    if (x.env_steps == 0) continue;  // not among --configs
    const double ratio = x.env_steps_per_s / out[0].env_steps_per_s;
    std::printf(
        "%-16s %10lld %9.2f %8.0f %8.2fx %10.1f %6.2f/%lld %9.3f %10.3f %8.4f %7.3f %8.4f %7.3f\n",
        configs[i].name, static_cast<long long>(x.env_steps), x.seconds, x.env_steps_per_s, ratio,
        x.trajectories_per_s, x.mean_staleness, static_cast<long long>(x.max_staleness),
        x.eval_success, x.train_success, x.behaviour_kl, x.importance_capped, x.approx_kl,
        x.clip_fraction);
    j[configs[i].name] = {
        {"env_steps_per_s", x.env_steps_per_s},
        {"speedup", ratio},
        {"trajectories_per_s", x.trajectories_per_s},
        {"mean_staleness", x.mean_staleness},
        {"max_staleness", x.max_staleness},
        {"behaviour_kl", x.behaviour_kl},
        {"importance_capped", x.importance_capped},
        {"approx_kl", x.approx_kl},
        {"clip_fraction", x.clip_fraction},
        {"eval_success",
         std::isfinite(x.eval_success) ? nlohmann::json(x.eval_success) : nlohmann::json()},
        {"eval_success_delta_pp", std::isfinite(x.eval_success)
                                      ? nlohmann::json(100 * (x.eval_success - out[0].eval_success))
                                      : nlohmann::json()},
        {"eval_success_per_seed", evals[i]},
        {"train_success",
         std::isfinite(x.train_success) ? nlohmann::json(x.train_success) : nlohmann::json()}};
  }
  // Success against sync seed by seed: the seeds spread far more than the levels differ, so the
  // comparison is paired (same seed, same latency schedule) and carries its standard error.
  std::printf("%-16s %14s %22s\n", "config", "eval_succ sd", "vs sync, paired (pp)");
  for (size_t i = 0; i < configs.size(); ++i) {
    if (evals[i].empty()) continue;
    const Spread spread = SpreadOf(evals[i]);
    const Spread paired = SpreadOf(Differences(evals[i], evals[0]));
    if (i == 0 || paired.n == 0) {
      std::printf("%-16s %14.3f\n", configs[i].name, spread.sd);
    } else {
      std::printf("%-16s %14.3f %12.1f +- %5.1f\n", configs[i].name, spread.sd, 100 * paired.mean,
                  100 * paired.se);
    }
    if (!evals[i].empty()) j[configs[i].name]["eval_success_sd"] = spread.sd;
    if (paired.n > 0 && i > 0) {
      j[configs[i].name]["paired_delta_pp"] = 100 * paired.mean;
      j[configs[i].name]["paired_delta_se_pp"] = 100 * paired.se;
    }
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
