// AgreeOnFailure: how the ranks of a run learn together that one of them failed.
//
// A failure only some ranks see (a corrupt chunk only one rank reads, a checkpoint only rank 0
// writes) must end the run on all of them at the same point instead of leaving the rest blocked
// in the next collective. Every rank calls it at the same point of the run, with its own status.
#pragma once

#include <string>

#include "common/status.h"
#include "engine/dist/communicator.h"

namespace engine {

// Collective (one AllreduceMax). A rank that failed returns its own error; the others return
// failed_precondition naming the highest rank that failed ("stopped: rank R failed <what> (its
// log says why)"); Ok on every rank when none did.
common::Status AgreeOnFailure(const common::Status& mine, Communicator& comm,
                              const std::string& what);

}  // namespace engine
