// Test and benchmark helper: writes HDF5 files in the robomimic / LIBERO layout with the HDF5
// C API, so no binary fixture is checked in, and edits them to make each kind of bad data on
// purpose. Content is a deterministic function of (seed, demo, key, element).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"
#include "storage/hdf5_file.h"

namespace storage::testing {

// Writes or edits one HDF5 file. Paths are absolute inside the file ("data/demo_0/actions");
// missing parent groups are created.
class Hdf5Writer {
 public:
  enum class Type { kU8, kI32, kI64, kF32, kF64 };
  static common::Result<Hdf5Writer> Create(const std::string& path);
  static common::Result<Hdf5Writer> OpenForEdit(const std::string& path);

  // `data` holds the elements in the memory form of `type`. gzip > 0 stores it chunked and
  // deflate-compressed, as robomimic's conversion scripts do.
  common::Status WriteDataset(const std::string& path, Type type, const std::vector<int64_t>& dims,
                              const void* data, int gzip = 0);
  common::Status CreateGroup(const std::string& path);
  common::Status WriteStringAttribute(const std::string& object, const std::string& name,
                                      const std::string& value);
  common::Status WriteIntAttribute(const std::string& object, const std::string& name,
                                   int64_t value);
  // A 1-D dataset of fixed-length strings, as h5py writes np.array([...], dtype="S").
  common::Status WriteStringList(const std::string& path, const std::vector<std::string>& values);
  common::Status Delete(const std::string& path);

 private:
  H5Handle file_;
};

struct RobomimicFileSpec {
  int demos = 3;
  int frames = 12;                   // per demo, unless frames_per_demo is given
  std::vector<int> frames_per_demo;  // one per demo
  int cameras = 2;                   // agentview_image, robot0_eye_in_hand_image
  int image_size = 16;
  int action_dim = 7;
  bool f32_actions = false;  // robomimic writes float64
  int gzip = 0;
  uint64_t seed = 1;
  std::string env_args = R"({"env_name": "Lift", "type": 1, "env_kwargs": {"control_freq": 20}})";
  std::string problem_info;  // LIBERO: {"language_instruction": "..."}; empty: none
  std::map<std::string, std::vector<std::string>> masks;  // mask/<name> -> demo names
  // Demo group names; default demo_0 .. demo_{demos-1}. Written in this order.
  std::vector<std::string> demo_names;
};

// Writes the file and returns, per demo in numeric order, the episode the importer must produce
// from it (keys in name order, integers as i32, attributes demo and source_file, and the
// language when problem_info has one).
common::Result<std::vector<Episode>> WriteRobomimicFile(const std::string& path,
                                                        const RobomimicFileSpec& spec);

// A fresh empty directory under the test temp dir (or /tmp), removed by the caller.
std::string MakeTempDir(const std::string& prefix);

}  // namespace storage::testing
