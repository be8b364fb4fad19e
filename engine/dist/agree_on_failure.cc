#include "engine/dist/agree_on_failure.h"

namespace engine {

common::Status AgreeOnFailure(const common::Status& mine, Communicator& comm,
                              const std::string& what) {
  const double failed_rank = mine.ok() ? -1.0 : static_cast<double>(comm.rank());
  const double first = comm.AllreduceMax(failed_rank);
  if (!mine.ok()) return mine;
  if (first < 0) return common::Status::Ok();
  return common::FailedPrecondition("stopped: rank " + std::to_string(static_cast<int>(first)) +
                                    " failed " + what + " (its log says why)");
}

}  // namespace engine
