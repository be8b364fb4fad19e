// DemoSource: a built-in, endless stream of behaviour-cloning samples, each a pure function of
// (source seed, global sample index, sample seed, composition), which is what lets a run be
// replayed exactly and resumed on any number of ranks. The trainer's "sim:*" datasets are
// DemoSources: "sim:reach" is ReachTask (engine/sim/reach_task.h), "sim:push" and
// "sim:pick_place" are demonstrations of the table-top tasks (engine/sim/sim_samples.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "api/job_spec.h"
#include "common/status.h"
#include "engine/data/embodied_lengths.h"
#include "engine/model/packed_batch.h"

namespace engine {

class DemoSource {
 public:
  virtual ~DemoSource() = default;
  // Fills *out (reusing its buffers) with global sample `index`: composition `comp`, flow noise
  // and time from `sample_seed`, language ids below `vocab`.
  virtual void MakeSample(uint64_t index, uint64_t sample_seed, const data::SampleComposition& comp,
                          int vocab, PolicySample* out) const = 0;
};

// The trainer's built-in stream for engine.data.dataset `dataset`: the table-top task of
// "sim:push" or "sim:pick_place" (their demonstrations perturbed up to demo_noise,
// engine.data.demo_noise), and ReachTask for anything else (the stream "sim:reach" and the
// held-out samples of earlier releases). Errors (invalid_argument): an action_dim the task cannot
// express, a vocab too small for its instructions, or demo_noise outside [0, 1].
common::Result<std::unique_ptr<DemoSource>> MakeDemoSource(const std::string& dataset,
                                                           int action_dim, int horizon,
                                                           uint64_t seed, int vocab,
                                                           double demo_noise = api::kDefaultDemoNoise);

}  // namespace engine
