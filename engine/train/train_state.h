// TrainState: what of a training run in progress a checkpoint saves and a resume restores on
// every rank: the replica's parameters, AdamW's moments and step count, and with
// engine.fp8.allreduce this rank's residual (the gradient it still owes). The step and the data
// position travel beside it (engine/format/checkpoint.h's DataPosition, TrainData::PositionAt); the
// run's configuration is the checkpointer's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/dist/fp8_allreduce.h"
#include "engine/optim/adamw.h"

namespace engine {

struct TrainState {
  float* params = nullptr;  // n floats, identical on every rank
  size_t n = 0;
  AdamW* adam = nullptr;
  Fp8Allreduce* fp8_allreduce = nullptr;  // null without engine.fp8.allreduce
};

}  // namespace engine
