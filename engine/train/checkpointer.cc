#include "engine/train/checkpointer.h"

#include <filesystem>
#include <utility>

#include "common/file_util.h"
#include "common/log.h"
#include "engine/dist/agree_on_failure.h"

namespace engine {

common::Result<Checkpointer> Checkpointer::Create(const std::string& dir,
                                                  const api::CheckpointOptions& options,
                                                  nlohmann::json config, Communicator& comm,
                                                  EventSink* events) {
  std::string absolute;
  common::Status made = common::Status::Ok();
  if (comm.rank() == 0 && !dir.empty()) {
    made = common::MakeDirs(dir);
    if (made.ok()) absolute = std::filesystem::absolute(dir).lexically_normal().string();
  }
  // Only rank 0 writes checkpoints, so only it can fail here: the others learn it now rather than
  // wait for it in the first step's collectives.
  if (comm.world_size() > 1) {
    EMBODY_RETURN_IF_ERROR(AgreeOnFailure(made, comm, "to create the checkpoint directory"));
  }
  EMBODY_RETURN_IF_ERROR(made);
  return Checkpointer(!dir.empty(), std::move(absolute), options, std::move(config), comm,
                      comm.rank() == 0 ? events : nullptr);
}

Checkpointer::Checkpointer(bool enabled, std::string dir, const api::CheckpointOptions& options,
                           nlohmann::json config, Communicator& comm, EventSink* events)
    : enabled_(enabled),
      dir_(std::move(dir)),
      every_steps_(options.every_steps),
      keep_(options.keep),
      config_(std::move(config)),
      comm_(&comm),
      events_(events) {}

bool Checkpointer::Due(int done, int steps, bool stopping) const {
  const bool periodic = every_steps_ > 0 && done % every_steps_ == 0;
  return enabled_ && (periodic || done == steps || stopping);
}

common::Status Checkpointer::Save(int done, const TrainState& state, const DataPosition& data) {
  std::vector<float> residuals;
  if (state.fp8_allreduce != nullptr && comm_->world_size() > 1) {
    // One rank exchanges nothing and so owes nothing: its checkpoint has no residuals.
    comm_->GatherFloats(state.fp8_allreduce->residual().data(), state.n, &residuals, 0);
  }
  const common::Status saved =
      comm_->rank() == 0 ? Write(done, state, data, std::move(residuals)) : common::Status::Ok();
  return AgreeOnFailure(saved, *comm_, "to write a checkpoint");
}

common::Status Checkpointer::Write(int done, const TrainState& state, const DataPosition& data,
                                   std::vector<float> residuals) {
  CheckpointData d;
  d.grad_residual_ranks = residuals.empty() ? 0 : static_cast<uint32_t>(comm_->world_size());
  d.grad_residuals = std::move(residuals);
  d.step = done;
  d.adam_t = state.adam->t();
  d.config = config_;
  d.params.assign(state.params, state.params + state.n);
  d.adam_m = state.adam->m();
  d.adam_v = state.adam->v();
  d.data = data;
  const std::string path = CheckpointPath(dir_, done);
  auto bytes = SaveCheckpoint(path, d);
  if (!bytes.ok()) return bytes.status();
  EMBODY_RETURN_IF_ERROR(PruneCheckpoints(dir_, keep_));
  last_path_ = path;
  common::LogInfo(
      "checkpoint written",
      {{"step", std::to_string(done)}, {"path", path}, {"bytes", std::to_string(*bytes)}});
  if (events_ != nullptr) {
    events_->Post({{"type", "checkpoint"}, {"step", done}, {"path", path}, {"bytes", *bytes}});
  }
  return common::Status::Ok();
}

}  // namespace engine
