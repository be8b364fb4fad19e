// The LeRobot datasets storage/parquet/testdata/gen_lerobot.mjs writes at build time (parquet
// and metadata from an independent writer, no videos), made whole: copied and given their
// camera videos, encoded here from frames a test can recompute (BlockFrames, seed episode + 1).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace storage::testing {

// The fixtures' directory (EMBODY_LEROBOT_FIXTURES): "" and `why_not` set where they were not
// generated (no node/npm at build time).
struct LerobotFixtures {
  std::string dir;
  nlohmann::json expected;  // expected.json
};
common::Result<LerobotFixtures> FindLerobotFixtures(const std::string& dir);

// Copies layout `version` ("v21", "v30") to `dest` (which must not exist) and encodes its videos.
common::Status MakeLerobotDataset(const LerobotFixtures& fixtures, const std::string& version,
                                  const std::string& dest);

}  // namespace storage::testing
