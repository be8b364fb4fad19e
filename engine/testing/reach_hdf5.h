// Test and benchmark helper: a robomimic-layout HDF5 file whose demonstrations can be learned,
// for training the engine on a dataset imported through the storage importer.
//
// Each demo is a reach: the end effector starts at a random point and moves toward a goal with a
// proportional controller. The goal is seen only in the camera (a bright blob on a dark 84×84
// agentview image: x → column, y → row, z → blob size); the end effector's position is proprio
// (obs/robot0_eef_pos; obs/robot0_eef_quat and obs/robot0_gripper_qpos are there too, as in
// robomimic, slowly varying). The action's first three dimensions are the controller's velocity
// toward the goal, the gripper closes near it, the rest follow the position. A policy that reads
// image and state predicts the action chunk well; one that does not, poorly — so the loss falls
// only when the data arrives intact and mapped right.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "storage/token_mapping.h"

namespace engine::testing {

struct ReachHdf5Spec {
  int demos = 16;
  int frames = 24;  // per demo
  int image_size = 84;
  int action_dim = 7;
  uint64_t seed = 1;
  std::string language;  // written as LIBERO's problem_info when non-empty
};

common::Status WriteReachHdf5(const std::string& path, const ReachHdf5Spec& spec);

// Writes the file to `dir`/reach.hdf5 and imports it (storage::ImportHdf5, the importer behind
// `embody-data import-hdf5`) into `dir`/dataset with small shards (shard_kib) and chunks of
// chunk_bytes, so a test exercises several shards and many checksummed chunks. Returns the
// dataset directory.
common::Result<std::string> MakeReachDataset(const std::string& dir, const ReachHdf5Spec& spec,
                                             int shard_kib = 256, int chunk_bytes = 16 << 10,
                                             storage::TokenMapping mapping = {});

}  // namespace engine::testing
