// TrainState: what of a training run in progress a checkpoint saves and a resume restores on
// every rank: the replica's parameters, AdamW's moments and step count, and with
// engine.fp8.allreduce this rank's residual (the gradient it still owes). The step and the data
// position travel beside it (engine/checkpoint.h's DataPosition); the run's configuration is the
// checkpointer's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/checkpoint.h"
#include "engine/data/dataset_stream.h"
#include "engine/dist/fp8_allreduce.h"
#include "engine/optim/adamw.h"

namespace engine {

struct TrainState {
  float* params = nullptr;  // n floats, identical on every rank
  size_t n = 0;
  AdamW* adam = nullptr;
  Fp8Allreduce* fp8_allreduce = nullptr;  // null without engine.fp8.allreduce
};

// Where the data stands before global sample next_sample of the stream seeded `seed`: on a
// dataset (stream and its shards' fingerprint) also as epoch and place in the epoch; the
// built-in stream (stream null) has neither.
inline DataPosition DataPositionAt(uint64_t seed, uint64_t next_sample,
                                   const data::DatasetStream* stream, uint64_t fingerprint) {
  DataPosition p;
  p.seed = seed;
  p.next_sample = next_sample;
  if (stream != nullptr) {
    p.epoch = stream->Epoch(next_sample);
    p.in_epoch = stream->InEpoch(next_sample);
    p.dataset_samples = stream->samples();
    p.dataset_fingerprint = fingerprint;
  }
  return p;
}

}  // namespace engine
