// AgreeOnStop: how the ranks of a run agree to stop early (SIGTERM) after the same step.
//
// The signal reaches the ranks of an mpirun job at slightly different moments. A rank that left
// its loop on its own flag would leave the others blocked in the next step's collectives, so a
// loop never acts on its own flag: each rank's flag is summed over the ranks with a figure the
// loop all-reduces every step anyway, and every rank stops after the step in which any flag was
// up. The supervised trainer does the same in train/train_step.cc; the RL loops use these.
#pragma once

#include <atomic>

#include "engine/dist/communicator.h"

namespace engine {

// Whether `flag` is set (a missing flag never is).
inline bool Raised(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

// Collective (one AllreduceMax): true on every rank when any rank passed stop_here. For the point
// before a loop's first step, where there is nothing to carry the flag.
bool AgreeOnStop(bool stop_here, Communicator& comm);

struct SumAndStop {
  double sum = 0;     // x summed over the ranks
  bool stop = false;  // some rank passed stop_here
};

// Collective (one all-reduce of two doubles, where the loop would sum x alone): x summed over the
// ranks, with the ranks' stop flags. The flag's slot adds nothing to x's: with one rank the sum
// is x itself, and for a whole-number x (a count) it is exact, so the same as AllreduceSum(x).
SumAndStop AllreduceSumAndStop(double x, bool stop_here, Communicator& comm);

}  // namespace engine
