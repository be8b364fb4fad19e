#include "engine/train/resume.h"

#include <algorithm>
#include <utility>

#include "common/file_util.h"
#include "common/log.h"

namespace engine {

common::Status CheckResumable(const CheckpointData& ck, const ResumeExpectation& want,
                              const std::string& path) {
  if (!ck.has_data_position) {
    return common::InvalidArgument(path + " is a version 1 checkpoint without a data position; " +
                                   "it cannot be resumed exactly");
  }
  if (!ck.config.contains("model") || ck.config["model"] != want.model ||
      ck.params.size() != want.params) {
    return common::InvalidArgument(path + " holds a different model (" +
                                   ck.config.value("model", nlohmann::json()).dump() +
                                   ") than the job's (" + want.model.dump() + ")");
  }
  if (ck.data.seed != want.seed) {
    return common::InvalidArgument(path + " continues data stream seed " +
                                   std::to_string(ck.data.seed) + " but the job's seed is " +
                                   std::to_string(want.seed));
  }
  if (ck.data.dataset_samples != want.dataset_samples ||
      ck.data.dataset_fingerprint != want.dataset_fingerprint) {
    auto describe = [](uint64_t n, uint64_t f) {
      return n == 0 ? std::string("the built-in stream")
                    : "a dataset of " + std::to_string(n) + " samples (fingerprint " +
                          std::to_string(f) + ")";
    };
    return common::InvalidArgument(
        path + " continues " + describe(ck.data.dataset_samples, ck.data.dataset_fingerprint) +
        " but the job trains on " + describe(want.dataset_samples, want.dataset_fingerprint));
  }
  if (ck.step > want.steps) {
    return common::InvalidArgument(path + " is at step " + std::to_string(ck.step) +
                                   ", past the job's " + std::to_string(want.steps) + " steps");
  }
  return common::Status::Ok();
}

common::Result<CheckpointData> ReadCheckpointOnAllRanks(const std::string& path, bool newest,
                                                        Communicator& comm) {
  // One message: 'K' and the file's bytes, or 'E' and why rank 0 could not read it.
  std::string msg;
  if (comm.rank() == 0) {
    const std::string chosen = newest ? NewestCheckpointFrom(path) : path;
    if (chosen != path) {
      common::LogInfo("a newer checkpoint of this run exists; resuming from it",
                      {{"asked", path}, {"resuming_from", chosen}});
    }
    auto bytes = common::ReadFile(chosen);
    if (bytes.ok()) {
      msg.reserve(bytes->size() + 1);
      msg = "K";
      msg += *bytes;
    } else {
      msg = "E" + bytes.status().message();
    }
  }
  comm.BroadcastBytes(&msg, 0);
  if (msg.empty() || msg[0] != 'K') {
    return common::NotFound("resume_from " + path + ": " + (msg.empty() ? "" : msg.substr(1)));
  }
  msg.erase(0, 1);
  auto d = DecodeCheckpoint(msg);
  if (!d.ok()) return common::InvalidArgument("resume_from " + path + ": " + d.status().message());
  return d;
}

common::Result<ResumePoint> Resume(const std::string& path, bool newest,
                                   const ResumeExpectation& want, Communicator& comm,
                                   TrainState* state) {
  EMBODY_ASSIGN_OR_RETURN(ck, ReadCheckpointOnAllRanks(path, newest, comm));
  EMBODY_RETURN_IF_ERROR(CheckResumable(ck, want, path));
  const int rank = comm.rank(), world = comm.world_size();
  if (state->fp8_allreduce != nullptr) {
    // Checked (n finite floats) before anything else is restored.
    EMBODY_RETURN_IF_ERROR(state->fp8_allreduce->SetResidual(
        ResidualForRank(ck.grad_residuals, ck.grad_residual_ranks, state->n, rank, world)));
  }
  std::copy(ck.params.begin(), ck.params.end(), state->params);
  state->adam->Restore(ck.adam_t, std::move(ck.adam_m), std::move(ck.adam_v));
  const ResumePoint at{ck.step, ck.data.next_sample};
  if (rank == 0) {
    common::LogInfo("resuming",
                    {{"path", path},
                     {"step", std::to_string(at.step)},
                     {"next_sample", std::to_string(at.next_sample)},
                     {"saved_world_size", std::to_string(ck.config.value("world_size", 0))},
                     {"world_size", std::to_string(world)}});
  }
  return at;
}

}  // namespace engine
