#include "engine/jobs/job.h"

#include <cstdio>
#include <cstdlib>

namespace engine::jobs {

JobEntry EntryFor(api::JobKind kind) {
  switch (kind) {
    case api::JobKind::kTrain:
      return &Train;
    case api::JobKind::kRl:
      return &Rl;
    case api::JobKind::kEval:
      return &Eval;
    default:
      break;
  }
  // JobContext::Parse refuses every other kind before anything runs.
  std::fprintf(stderr, "embody-engine: no entry for job kind %s\n", api::JobKindName(kind));
  std::abort();
}

}  // namespace engine::jobs
