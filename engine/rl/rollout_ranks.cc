#include "engine/rl/rollout_ranks.h"

#include <chrono>
#include <thread>

#include "engine/format/binary_io.h"
#include "engine/dist/agree_on_stop.h"
#include "engine/model/policy_options.h"

namespace engine::rl {
namespace {

constexpr int kToLearner = 71;  // 'S' segment, 'F' failure, 'T' stop requested, 'E' end
constexpr int kToRollout = 72;  // 'W' weights, 'E' end
constexpr char kSegment = 'S', kFailure = 'F', kStop = 'T', kEnd = 'E', kWeights = 'W';
// The learner polls at this period while nothing has arrived.
constexpr std::chrono::microseconds kPoll{50};

template <typename T>
void PutVector(std::string* out, const std::vector<T>& v) {
  Put(out, static_cast<uint64_t>(v.size()));
  PutArray(out, v);
}

template <typename T>
bool GetVector(BinaryReader& in, std::vector<T>* v) {
  uint64_t n = 0;
  return in.Get(&n) && in.GetArray(n, v);
}

void PutSample(std::string* out, const PolicySample& s) {
  PutVector(out, s.language);
  Put(out, static_cast<int32_t>(s.frames));
  Put(out, static_cast<int32_t>(s.cameras));
  Put(out, static_cast<int32_t>(s.patches_per_camera));
  Put(out, static_cast<int32_t>(s.state_tokens));
  PutVector(out, s.patches);
  PutVector(out, s.states);
  PutVector(out, s.actions);
  PutVector(out, s.noise);
  Put(out, s.time);
  Put(out, s.weight);
}

bool GetSample(BinaryReader& in, PolicySample* s) {
  int32_t frames = 0, cameras = 0, ppc = 0, state_tokens = 1;
  if (!GetVector(in, &s->language) || !in.Get(&frames) || !in.Get(&cameras) || !in.Get(&ppc) ||
      !in.Get(&state_tokens) || !GetVector(in, &s->patches) || !GetVector(in, &s->states) || !GetVector(in, &s->actions) ||
      !GetVector(in, &s->noise) || !in.Get(&s->time) || !in.Get(&s->weight)) {
    return false;
  }
  s->frames = frames;
  s->cameras = cameras;
  s->patches_per_camera = ppc;
  s->state_tokens = state_tokens;
  return true;
}

common::Status Garbled(const char* what) {
  return common::Internal(std::string("rollout ranks: a garbled ") + what + " message");
}

// Receives and discards until every rank in `peers` sent its end message (the ending of
// rollout_ranks.h); peers whose end is already in are marked in *ended.
void DrainUntilEnded(Communicator& comm, int tag, int first, std::vector<bool>* ended) {
  std::string bytes;
  int source = 0;
  auto all = [&] {
    for (bool e : *ended) {
      if (!e) return false;
    }
    return true;
  };
  while (!all()) {
    if (!comm.TryReceiveBytes(tag, &bytes, &source)) {
      std::this_thread::sleep_for(kPoll);
      continue;
    }
    const int i = source - first;
    if (!bytes.empty() && bytes[0] == kEnd && i >= 0 && i < static_cast<int>(ended->size())) {
      (*ended)[i] = true;
    }
  }
  comm.FlushSends();
}

}  // namespace

common::Result<RolloutLayout> RolloutLayout::For(int world_size, int rollout_ranks) {
  RolloutLayout l;
  l.rollout_ranks = rollout_ranks;
  l.learners = world_size - rollout_ranks;
  if (rollout_ranks <= 0 || l.learners < 1 || rollout_ranks % l.learners != 0) {
    return common::InvalidArgument(
        "needs fewer rollout ranks than ranks, and a whole number of rollout ranks per learner "
        "(rollout_ranks " +
            std::to_string(rollout_ranks) + " of " + std::to_string(world_size) + " ranks)",
        "engine.rl.disaggregated.rollout_ranks");
  }
  l.per_learner = rollout_ranks / l.learners;
  return l;
}

std::string EncodeSegment(const Segment& s, const ActorTotals& totals) {
  std::string out(1, kSegment);
  Put(&out, totals.wait_ns);
  Put(&out, totals.inferences);
  Put(&out, totals.inferred);
  Put(&out, static_cast<int32_t>(totals.env_threads));
  Put(&out, static_cast<int32_t>(s.env));
  Put(&out, s.batch);
  Put(&out, static_cast<uint64_t>(s.obs.size()));
  for (const PolicySample& o : s.obs) PutSample(&out, o);
  PutVector(&out, s.actions);
  PutVector(&out, s.behaviour_logp);
  PutVector(&out, s.values);
  PutVector(&out, s.rewards);
  PutVector(&out, s.dones);
  PutVector(&out, s.versions);
  PutSample(&out, s.last_obs);
  Put(&out, s.episodes);
  Put(&out, s.successes);
  Put(&out, s.returns);
  return out;
}

common::Status DecodeSegment(const std::string& bytes, Segment* s, ActorTotals* totals) {
  if (bytes.empty() || bytes[0] != kSegment) return Garbled("segment");
  BinaryReader in(bytes, bytes.size());
  char type = 0;
  int32_t env_threads = 0, env = 0;
  uint64_t steps = 0;
  if (!in.Get(&type) || !in.Get(&totals->wait_ns) || !in.Get(&totals->inferences) ||
      !in.Get(&totals->inferred) || !in.Get(&env_threads) || !in.Get(&env) || !in.Get(&s->batch) ||
      !in.Get(&steps) || steps > in.left()) {
    return Garbled("segment");
  }
  totals->env_threads = env_threads;
  s->env = env;
  s->obs.resize(steps);
  for (PolicySample& o : s->obs) {
    if (!GetSample(in, &o)) return Garbled("segment");
  }
  if (!GetVector(in, &s->actions) || !GetVector(in, &s->behaviour_logp) ||
      !GetVector(in, &s->values) || !GetVector(in, &s->rewards) || !GetVector(in, &s->dones) ||
      !GetVector(in, &s->versions) || !GetSample(in, &s->last_obs) || !in.Get(&s->episodes) ||
      !in.Get(&s->successes) || !in.Get(&s->returns) || in.left() != 0) {
    return Garbled("segment");
  }
  const size_t T = s->obs.size();
  if (s->behaviour_logp.size() != T || s->values.size() != T || s->rewards.size() != T ||
      s->dones.size() != T || s->versions.size() != T || (T > 0 && s->actions.size() % T != 0)) {
    return Garbled("segment");
  }
  return common::Status::Ok();
}

std::string EncodeWeights(ActorCritic& policy, int64_t version) {
  std::string out(1, kWeights);
  Put(&out, version);
  const float* p = policy.trunk().params();
  Put(&out, static_cast<uint64_t>(policy.trunk().num_params()));
  out.append(reinterpret_cast<const char*>(p), policy.trunk().num_params() * sizeof(float));
  PutVector(&out, policy.heads());
  return out;
}

common::Status DecodeWeights(const std::string& bytes, std::vector<float>* trunk,
                             std::vector<float>* heads, int64_t* version) {
  if (bytes.empty() || bytes[0] != kWeights) return Garbled("weights");
  BinaryReader in(bytes, bytes.size());
  char type = 0;
  if (!in.Get(&type) || !in.Get(version) || !GetVector(in, trunk) || !GetVector(in, heads) ||
      in.left() != 0) {
    return Garbled("weights");
  }
  return common::Status::Ok();
}

RolloutRanks::RolloutRanks(Communicator& world, const RolloutLayout& layout, int envs_per_rank,
                           int64_t batches)
    : world_(world),
      layout_(layout),
      first_(layout.FirstRolloutOf(world.rank())),
      envs_per_rank_(envs_per_rank),
      batches_(batches),
      totals_(layout.per_learner),
      received_(layout.per_learner, 0),
      ended_(layout.per_learner, false) {}

RolloutRanks::~RolloutRanks() {
  for (int i = 0; i < layout_.per_learner; ++i) {
    world_.SendBytes(first_ + i, kToRollout, std::string(1, kEnd));
  }
  DrainUntilEnded(world_, kToLearner, first_, &ended_);
}

common::Status RolloutRanks::Receive(bool* got) {
  std::string bytes;
  int source = 0;
  *got = world_.TryReceiveBytes(kToLearner, &bytes, &source);
  if (!*got) return common::Status::Ok();
  const int i = source - first_;
  if (i < 0 || i >= layout_.per_learner || bytes.empty()) return Garbled("rollout");
  if (bytes[0] == kEnd) {
    ended_[i] = true;
    return common::Status::Ok();
  }
  if (bytes[0] == kFailure) {
    return common::Internal("rollout rank " + std::to_string(source) + ": " + bytes.substr(1));
  }
  if (bytes[0] == kStop) {
    stop_requested_ = true;
    return common::Status::Ok();
  }
  Segment s;
  EMBODY_RETURN_IF_ERROR(DecodeSegment(bytes, &s, &totals_[i]));
  if (s.env < 0 || s.env >= envs_per_rank_ || s.batch < 0 || s.batch >= batches_) {
    return Garbled("segment");
  }
  s.env += i * envs_per_rank_;
  arrived_.push_back(std::move(s));
  ++received_[i];
  return common::Status::Ok();
}

common::Result<std::vector<Segment>> RolloutRanks::Take(int64_t batch, int count) {
  while (true) {
    int ready = 0;
    for (const Segment& s : arrived_) ready += s.batch == batch ? 1 : 0;
    if (ready >= count) break;
    bool got = false;
    EMBODY_RETURN_IF_ERROR(Receive(&got));
    if (!got) {
      // A rollout rank that ended short (it failed) will not send what this batch lacks.
      for (size_t i = 0; i < ended_.size(); ++i) {
        if (ended_[i] && received_[i] < batches_ * envs_per_rank_) {
          return common::Unavailable("rollout rank " + std::to_string(first_ + i) +
                                     " ended after " + std::to_string(received_[i]) + " of " +
                                     std::to_string(batches_ * envs_per_rank_) + " segments");
        }
      }
      std::this_thread::sleep_for(kPoll);
    }
  }
  std::vector<Segment> out;
  for (auto it = arrived_.begin(); it != arrived_.end() && static_cast<int>(out.size()) < count;) {
    if (it->batch == batch) {
      out.push_back(std::move(*it));
      it = arrived_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void RolloutRanks::Publish(ActorCritic& policy, int64_t version) {
  if (version >= batches_) return;
  const std::string bytes = EncodeWeights(policy, version);
  for (int i = 0; i < layout_.per_learner; ++i) world_.SendBytes(first_ + i, kToRollout, bytes);
}

ActorTotals RolloutRanks::totals() const {
  ActorTotals sum;
  for (const ActorTotals& t : totals_) {
    sum.wait_ns += t.wait_ns;
    sum.inferences += t.inferences;
    sum.inferred += t.inferred;
    sum.env_threads += t.env_threads;
  }
  return sum;
}

common::Result<SyncPpoResult> RunRolloutRank(const SyncPpoOptions& options, ActorCritic& policy,
                                             Communicator& world, const RolloutLayout& layout,
                                             int64_t batches) {
  const api::RlOptions& rl = options.engine.rl;
  const int learner = layout.LearnerOf(world.rank());
  EMBODY_ASSIGN_OR_RETURN(config, PolicyConfigFromOptions(options.engine));
  PolicyStore store(policy);
  ActorSetup setup;
  setup.engine = options.engine;
  setup.policy = config;
  // Seeded as the colocated rank of the same index acts: one rollout rank beside one learner
  // steps what one rank's threads step.
  setup.rank = world.rank() - layout.learners;
  setup.max_staleness = rl.max_staleness;
  setup.store = &store;
  setup.batches = batches;
  SyncPpoResult result;
  std::vector<bool> learner_ended(1, false);
  auto started = ThreadActing::Start(setup, rl.env_async);
  common::Status failed = started.status();
  if (failed.ok()) {
    ThreadActing& acting = **started;
    const int64_t total = batches * rl.envs;
    int64_t sent = 0;
    bool asked_to_stop = false;
    std::string bytes;
    int source = 0;
    while (failed.ok() && sent < total && !learner_ended[0]) {
      // Passed on once, and acting goes on: the learner may still need this rank's segments to
      // finish the update the learners stop after.
      if (!asked_to_stop && Raised(options.stop_requested)) {
        world.SendBytes(learner, kToLearner, std::string(1, kStop));
        asked_to_stop = true;
      }
      while (world.TryReceiveBytes(kToRollout, &bytes, &source)) {
        if (!bytes.empty() && bytes[0] == kEnd) {
          learner_ended[0] = true;
          break;
        }
        std::vector<float> trunk, heads;
        int64_t version = 0;
        failed = DecodeWeights(bytes, &trunk, &heads, &version);
        if (!failed.ok()) break;
        if (trunk.size() != policy.trunk().num_params() || heads.size() != policy.heads().size()) {
          failed = Garbled("weights");
          break;
        }
        store.Publish(std::move(trunk), std::move(heads), version);
      }
      if (!failed.ok() || learner_ended[0]) break;
      Segment s;
      auto popped = acting.PopFor(kPoll, &s);
      if (!popped.ok()) {
        failed = popped.status();
        break;
      }
      if (!*popped) continue;
      world.SendBytes(learner, kToLearner, EncodeSegment(s, acting.totals()));
      ++sent;
    }
    started->reset();  // the actors stop here
    // Ended by its learner before its segments were all sent: the run stopped early.
    result.stopped = failed.ok() && sent < total;
  }
  if (!failed.ok()) world.SendBytes(learner, kToLearner, kFailure + failed.ToString());
  world.SendBytes(learner, kToLearner, std::string(1, kEnd));
  DrainUntilEnded(world, kToRollout, learner, &learner_ended);
  if (!failed.ok()) return failed;
  return result;
}

}  // namespace engine::rl
