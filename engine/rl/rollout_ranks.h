// Level 1 across MPI ranks (engine.rl.disaggregated.rollout_ranks = R > 0): of W ranks, the
// first L = W − R learn and the last R act. Learner l serves R / L rollout ranks,
// L + l·R/L … L + (l+1)·R/L − 1; each rollout rank runs its `envs` environments with the actors
// of async_actors.h (lockstep, or level 2's one thread per environment) on its own replica.
//
//   rollout → learner   every finished segment (one environment's rollout_steps steps, with the
//                       versions that acted them and the rank's actor counters), as it finishes
//   learner → rollout   every new version's parameters, after each update (never the last one's,
//                       which nothing acts with)
// The learners form their own communicator (Communicator::Split): they average gradients and
// pool statistics among themselves as colocated ranks do, each over its rollout ranks' segments.
// The staleness gate is the rollout rank's own store: it starts segment j only once it holds
// version ≥ j − η, and version v is sent only after batch v − 1 was learned, so staleness never
// exceeds η, as with threads.
//
// Ending: each side, once done (or stopping, or failing), sends an end message and receives,
// discarding, until its peers' end messages are in, so every message either side sent is
// delivered before the communicator goes away. A rollout rank that sees its learner's end stops
// acting; a rollout rank's failure reaches its learner as an error message, which fails the run.
// Stopping is the learners' decision: a rollout rank whose stop flag goes up sends its learner a
// stop message (ahead of the segments it sends later) and acts on until its learner ends it; the
// learners agree to stop after the same update (async_ppo.cc) and then end their rollout ranks.
// A rollout rank that stopped alone would leave its learner short of the update's segments.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/dist/communicator.h"
#include "engine/rl/async_actors.h"
#include "engine/rl/sync_ppo.h"

namespace engine::rl {

// Where the roles are, from the world size and engine.rl.disaggregated.rollout_ranks. Errors:
// the world cannot be split so (no learner, or R not a multiple of L).
struct RolloutLayout {
  int learners = 0;       // L
  int rollout_ranks = 0;  // R
  int per_learner = 0;    // R / L

  static common::Result<RolloutLayout> For(int world_size, int rollout_ranks);
  bool IsLearner(int rank) const { return rank < learners; }
  int LearnerOf(int rank) const { return (rank - learners) / per_learner; }
  // The world ranks of learner l's rollout ranks.
  int FirstRolloutOf(int learner) const { return learners + learner * per_learner; }
};

// The wire forms (tested on their own): a segment with the sending rank's counters, and a
// version's parameters. Decoding checks every length against the bytes there.
std::string EncodeSegment(const Segment& segment, const ActorTotals& totals);
common::Status DecodeSegment(const std::string& bytes, Segment* segment, ActorTotals* totals);
std::string EncodeWeights(ActorCritic& policy, int64_t version);
common::Status DecodeWeights(const std::string& bytes, std::vector<float>* trunk,
                             std::vector<float>* heads, int64_t* version);

// The learner's side: its rollout ranks' segments, and versions sent back. Take blocks (polling
// the communicator, so only the calling thread talks MPI) until `count` segments of `batch` are
// in; it fails on a rollout rank's error message, or when a rollout rank ended short.
class RolloutRanks final : public Acting {
 public:
  // `world` is the world communicator; segments arrive at most `batches` per environment.
  RolloutRanks(Communicator& world, const RolloutLayout& layout, int envs_per_rank,
               int64_t batches);
  // Sends the end message and drains (the ending above).
  ~RolloutRanks() override;
  RolloutRanks(const RolloutRanks&) = delete;
  RolloutRanks& operator=(const RolloutRanks&) = delete;

  common::Result<std::vector<Segment>> Take(int64_t batch, int count) override;
  int depth() const override { return static_cast<int>(arrived_.size()); }
  // Sends `version` to every rollout rank of this learner (not when version ≥ batches).
  void Publish(ActorCritic& policy, int64_t version) override;
  ActorTotals totals() const override;
  // A rollout rank's stop message has arrived (in a Take).
  bool stop_requested() const override { return stop_requested_; }

 private:
  common::Status Receive(bool* got);

  Communicator& world_;
  RolloutLayout layout_;
  int first_ = 0;  // world rank of the first rollout rank
  int envs_per_rank_ = 0;
  int64_t batches_ = 0;
  bool stop_requested_ = false;
  std::vector<Segment> arrived_;     // in order of arrival
  std::vector<ActorTotals> totals_;  // the latest reading of each rollout rank
  std::vector<int64_t> received_;    // segments from each rollout rank
  std::vector<bool> ended_;          // rollout ranks whose end message is in
};

// The rollout rank's side: acts until its `batches` segments per environment are sent or its
// learner ends (before they are: result.stopped). Its stop flag is passed on to the learner (the
// stopping above). `policy` is the starting policy (version 0), as every rank made it.
common::Result<SyncPpoResult> RunRolloutRank(const SyncPpoOptions& options, ActorCritic& policy,
                                             Communicator& world, const RolloutLayout& layout,
                                             int64_t batches);

}  // namespace engine::rl
