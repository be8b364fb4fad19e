#include "engine/rl/sync_ppo.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "common/file_util.h"
#include "common/log.h"
#include "common/rng.h"
#include "common/time_util.h"
#include "engine/dist/agree_on_stop.h"
#include "engine/eval/periodic_eval.h"
#include "engine/format/checkpoint.h"
#include "engine/model/policy_options.h"
#include "engine/policy/rl_checkpoint.h"
#include "engine/rl/gaussian.h"
#include "engine/sim/latency_env.h"
#include "engine/sim/make_env.h"

namespace engine::rl {
namespace {

nlohmann::json NumberOrNull(double x) { return std::isfinite(x) ? nlohmann::json(x) : nullptr; }

// Rank 0 reads the file and broadcasts it (other nodes may not see its disk); every rank decodes
// the same bytes, so every rank gets the same answer, errors included.
common::Result<CheckpointData> ReadOnAllRanks(const std::string& path, Communicator& comm) {
  std::string msg;
  if (comm.rank() == 0) {
    auto bytes = common::ReadFile(path);
    msg = bytes.ok() ? "K" + *bytes : "E" + bytes.status().message();
  }
  comm.BroadcastBytes(&msg, 0);
  if (msg.empty() || msg[0] != 'K') {
    return common::NotFound("init_from " + path + ": " + (msg.empty() ? "" : msg.substr(1)));
  }
  auto d = DecodeCheckpoint(msg.substr(1));
  if (!d.ok()) return common::InvalidArgument("init_from " + path + ": " + d.status().message());
  return d;
}

}  // namespace

common::Result<std::unique_ptr<ActorCritic>> MakeRlPolicy(const SyncPpoOptions& options,
                                                          const PolicyConfig& config,
                                                          Communicator& comm) {
  EMBODY_ASSIGN_OR_RETURN(policy,
                          ActorCritic::Create(config, options.engine.seed,
                                              static_cast<float>(options.engine.rl.init_log_std)));
  if (!options.init_from.empty()) {
    EMBODY_ASSIGN_OR_RETURN(ck, ReadOnAllRanks(options.init_from, comm));
    EMBODY_RETURN_IF_ERROR(policy->LoadTrunk(ck));
    if (comm.rank() == 0) {
      common::LogInfo("policy trunk loaded", {{"init_from", options.init_from}});
    }
  }
  return policy;
}

nlohmann::json RlStepEvent(const UpdateRecord& rec, int64_t step, int64_t steps, double lr,
                           double rollout_seconds, double update_seconds, double step_seconds,
                           int world_size) {
  const PpoStats& stats = rec.ppo;
  return {{"type", "step"},
          {"step", step},
          {"steps", steps},
          {"env_steps", rec.env_steps},
          {"env_steps_per_s", rec.env_steps_per_s},
          {"episodes", rec.episodes},
          {"mean_return", NumberOrNull(rec.mean_return)},
          {"success_rate", NumberOrNull(rec.success_rate)},
          {"policy_loss", stats.policy_loss},
          {"value_loss", stats.value_loss},
          {"entropy", stats.entropy},
          {"approx_kl", stats.approx_kl},
          {"clip_fraction", stats.clip_fraction},
          {"grad_norm", stats.grad_norm},
          {"lr", lr},
          {"rollout_seconds", rollout_seconds},
          {"update_seconds", update_seconds},
          {"step_seconds", step_seconds},
          {"world_size", world_size}};
}

PpoConfig PpoConfigFromOptions(const api::RlOptions& r) {
  PpoConfig c;
  c.gamma = r.gamma;
  c.gae_lambda = r.gae_lambda;
  c.clip = r.clip;
  c.value_clip = r.value_clip;
  c.value_coef = r.value_coef;
  c.entropy_coef = r.entropy_coef;
  c.epochs = r.epochs;
  c.minibatches = r.minibatches;
  c.lr = r.lr;
  c.max_grad_norm = r.max_grad_norm;
  c.importance_cap = r.importance_cap;
  c.proximal_behaviour = r.disaggregated && r.proximal == "behaviour";
  return c;
}

common::Result<SyncPpoResult> RunSyncPpo(const SyncPpoOptions& options, Communicator& comm,
                                         EventSink* events) {
  const api::RlOptions& rl = options.engine.rl;
  const uint64_t seed = options.engine.seed;
  EMBODY_ASSIGN_OR_RETURN(config, PolicyConfigFromOptions(options.engine));
  EMBODY_ASSIGN_OR_RETURN(policy, MakeRlPolicy(options, config, comm));
  auto made = sim::MakeVecEnv(sim::RlEnvSpec(rl, config.action_dim, config.vocab));
  if (!made.ok()) return common::InvalidArgument(made.status().message(), "engine.rl.task");
  // engine.rl.env_latency: the environments wait as a heavy simulator would (none by default).
  EMBODY_ASSIGN_OR_RETURN(env, sim::WithLatency(std::move(made).value(), rl.env_latency, seed,
                                                static_cast<uint64_t>(comm.rank()) * rl.envs));
  env->Reset(common::Rng::ForKey(seed, 0x656e76ULL, static_cast<uint64_t>(comm.rank())).NextU64());

  EMBODY_ASSIGN_OR_RETURN(periodic_eval, eval::PeriodicEval::ForRl(options.engine));
  const PpoConfig ppo = PpoConfigFromOptions(rl);
  PpoLearner learner(policy.get(), ppo, &comm, seed);
  const int N = rl.envs, T = rl.rollout_steps, A = config.action_dim;
  const int64_t per_update = static_cast<int64_t>(N) * T * comm.world_size();
  const int64_t total_updates = (rl.total_env_steps + per_update - 1) / per_update;

  SyncPpoResult result;
  sim::StepResult step;
  int64_t env_steps = 0;
  // Whether to stop, the same on every rank (agree_on_stop.h): a rank that left alone would leave
  // the others in the next update's gradient all-reduce.
  bool stop = AgreeOnStop(Raised(options.stop_requested), comm);
  for (int64_t version = 0; version < total_updates; ++version) {
    if (stop) {
      result.stopped = true;
      break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    Rollout r;
    r.policy_version = version;
    r.steps = T;
    r.envs = N;
    r.action_dim = A;
    r.obs.reserve(static_cast<size_t>(T) * N);
    r.actions.resize(static_cast<size_t>(T) * N * A);
    r.behaviour_logp.resize(static_cast<size_t>(T) * N);
    r.values.resize(static_cast<size_t>(T) * N);
    r.rewards.resize(static_cast<size_t>(T) * N);
    r.dones.resize(static_cast<size_t>(T) * N);
    double returns = 0, episodes = 0, successes = 0;
    for (int t = 0; t < T; ++t) {
      const std::vector<PolicySample>& obs = env->observations();
      EMBODY_RETURN_IF_ERROR(policy->Forward(obs));
      common::Rng noise =
          common::Rng::ForKey(seed, static_cast<uint64_t>(comm.rank()),
                              static_cast<uint64_t>(version), static_cast<uint64_t>(t));
      const float* log_std = policy->log_std();
      float* act = r.actions.data() + static_cast<size_t>(t) * N * A;
      for (int e = 0; e < N; ++e) {
        const float* mu = policy->mean() + static_cast<size_t>(e) * A;
        for (int j = 0; j < A; ++j) {
          act[e * A + j] = static_cast<float>(mu[j] + std::exp(log_std[j]) * noise.Normal());
        }
        const size_t i = static_cast<size_t>(t) * N + e;
        r.behaviour_logp[i] = static_cast<float>(GaussianLogProb(mu, log_std, act + e * A, A));
        r.values[i] = policy->value()[e];
      }
      r.obs.insert(r.obs.end(), obs.begin(), obs.end());
      EMBODY_RETURN_IF_ERROR(env->Step({act, static_cast<size_t>(N) * A}, &step));
      for (int e = 0; e < N; ++e) {
        const size_t i = static_cast<size_t>(t) * N + e;
        r.rewards[i] = step.reward[e];
        r.dones[i] = step.done[e];
        if (step.done[e]) {
          episodes += 1;
          successes += step.success[e];
          returns += step.episode_return[e];
        }
      }
    }
    EMBODY_RETURN_IF_ERROR(policy->Forward(env->observations()));
    r.last_values.assign(policy->value(), policy->value() + N);
    const auto t1 = std::chrono::steady_clock::now();

    PpoBatch batch;
    AppendRollout(std::move(r), ppo, &batch);
    EMBODY_ASSIGN_OR_RETURN(stats, learner.Update(batch));
    const auto t2 = std::chrono::steady_clock::now();

    env_steps += per_update;
    UpdateRecord rec;
    rec.env_steps = env_steps;
    // Every rank sees the same global episode count, so all of them take the same branches. The
    // ranks' stop flags travel with it.
    const SumAndStop counted = AllreduceSumAndStop(episodes, Raised(options.stop_requested), comm);
    rec.episodes = static_cast<int64_t>(counted.sum);
    stop = counted.stop;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    rec.mean_return = rec.episodes > 0 ? comm.AllreduceSum(returns) / rec.episodes : nan;
    rec.success_rate = rec.episodes > 0 ? comm.AllreduceSum(successes) / rec.episodes : nan;
    const double seconds = comm.AllreduceMax(common::SecondsBetween(t0, t2));
    rec.env_steps_per_s = per_update / seconds;
    rec.ppo = stats;
    result.updates.push_back(rec);
    if (events != nullptr && comm.rank() == 0) {
      nlohmann::json ev =
          RlStepEvent(rec, version + 1, total_updates, ppo.lr, common::SecondsBetween(t0, t1),
                      common::SecondsBetween(t1, t2), seconds, comm.world_size());
      // engine.eval_every: rank 0 alone evaluates; an error ends its run (the agent reports it).
      if (periodic_eval.Due(version + 1)) EMBODY_RETURN_IF_ERROR(periodic_eval.Run(*policy, &ev));
      events->Post(std::move(ev));
    }
  }
  if (comm.rank() == 0 && !options.checkpoint_dir.empty()) {
    EMBODY_ASSIGN_OR_RETURN(
        path, SaveRlPolicy(options.checkpoint_dir, *policy, options.engine,
                           static_cast<int64_t>(result.updates.size()), comm.world_size(), events));
    result.checkpoint = path;
  }
  result.final_heads = policy->heads();
  return result;
}

}  // namespace engine::rl
