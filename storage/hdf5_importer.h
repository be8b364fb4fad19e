// Imports a robomimic / LIBERO HDF5 file into a dataset directory.
//
// Layout read: data/demo_N/{obs/<key>, actions, rewards, dones, and any other per-frame
// dataset such as states}; demos are taken in numeric order (demo_2 before demo_10) and other
// members of `data` are ignored, as is next_obs (it repeats obs shifted by one frame). Keys
// become "obs/<key>", "actions", "rewards", ...; each must have one row per action.
// Kept from the file: the `env_args` attribute of `data` (JSON text, in the manifest's source),
// the language instruction from LIBERO's `problem_info` attribute (JSON with
// "language_instruction"), unless the caller gives one. `mask/<filter>` selects demos.
//
// Bad data is refused with an error naming the file and the demo, and nothing is left behind
// (dataset_writer.h builds the output under a temporary name): no `data` group, a demo without
// actions, a key whose frame count differs from actions', a misshaped key (a scalar, actions
// not (T,A), rewards/dones not (T), an *image* key not (T,H,W,C) u8, a key whose frame shape or
// type differs from the first demo's), NaN/Inf in actions (or, with NanPolicy::kSkip, the demo
// is skipped and counted), an episode longer than max_episode_frames.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "storage/dataset_writer.h"
#include "storage/manifest.h"

namespace storage {

enum class NanPolicy { kRefuse, kSkip };

struct ImportProgress {
  uint64_t demos_done = 0;
  uint64_t demos_total = 0;
  uint64_t frames = 0;
  uint64_t bytes = 0;  // episode data read so far
};

struct Hdf5ImportOptions {
  std::string filter;    // name under mask/; empty: every demo
  std::string language;  // overrides the file's language instruction when set
  int64_t max_episode_frames = 100000;
  NanPolicy nan_policy = NanPolicy::kRefuse;
  DatasetWriterOptions writer;
  std::function<void(const ImportProgress&)> progress;  // after each demo, on the caller's thread
};

struct ImportResult {
  DatasetManifest manifest;
  uint64_t episodes = 0;
  uint64_t frames = 0;
  uint64_t bytes = 0;        // dataset bytes written
  uint64_t skipped_nan = 0;  // demos skipped under NanPolicy::kSkip
  double seconds = 0;
};

// The end every importer shares: seals `writer`'s dataset with `source` in its manifest, and fills
// `result`'s counts, manifest and seconds since `start`.
common::Status FinishImport(DatasetWriter& writer, nlohmann::json source,
                            std::chrono::steady_clock::time_point start, ImportResult* result);

common::Result<ImportResult> ImportHdf5(const std::string& input, const std::string& out_dir,
                                        const Hdf5ImportOptions& options);

}  // namespace storage
