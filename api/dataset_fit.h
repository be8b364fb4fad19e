// Whether a train job's model and data options fit a dataset's keys, and how: which keys are its
// cameras and its proprioceptive state, how wide the state is and how many state tokens a frame
// takes. The one rule set behind two checks: the server's at submit, on the manifest of the
// dataset version a "dataset:" job binds (a job that cannot train on it is refused with a 400
// naming both sides before it is queued), and the engine's when it opens a "dir:" or bound
// dataset (engine/batches/dataset_source.h). Knows key names, dtypes and shapes only; it reads no
// data.
//
//   actions   the key "actions", numeric, one dimension per frame, as wide as
//             engine.model.action_dim;
//   cameras   engine.data.cameras, else every image key (obs/, u8, (H, W, C)); C in {1, 3, 4};
//   state     engine.data.proprio, else robomimic's eef pos/quat + gripper qpos, LIBERO's joint
//             + gripper states, or every low-dimensional obs key, concatenated; a frame's state
//             takes ⌈width / kStateTokenValues⌉ tokens of kStateTokenValues values each (the last
//             one zero-padded), at most kMaxStateTokens (a humanoid's 26-value state is two).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api/job_spec.h"
#include "common/status.h"

namespace api {

// Values per state token: the width of the policy's state embedding (engine::kStateDim).
inline constexpr int kStateTokenValues = 16;
inline constexpr int kMaxStateTokens = 4;

// One key of a dataset as its manifest lists it: "obs/agentview_image", "u8", {84, 84, 3}.
struct DatasetKeyShape {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;  // per frame
};

bool IsImageKey(const DatasetKeyShape& k);       // obs/, u8, (H, W, C)
bool IsLowDimObsKey(const DatasetKeyShape& k);   // obs/, not an image
int64_t FrameElements(const DatasetKeyShape& k);

struct DatasetFit {
  size_t actions = 0;            // index of the actions key
  std::vector<size_t> cameras;   // indices of the camera keys, in token order
  std::vector<size_t> proprio;   // indices of the state keys, concatenated in this order
  int state_width = 0;           // values in a frame's state
  int state_tokens = 1;          // ⌈state_width / kStateTokenValues⌉, at least 1
};

// `where` names the dataset in messages ("/data/lift" or "dataset lift@2"). Every refusal names
// the dataset's side and the job's, and carries the field of the job spec to change.
common::Result<DatasetFit> FitDataset(const std::vector<DatasetKeyShape>& keys,
                                      const DataOptions& data, int action_dim,
                                      const std::string& where);

// The keys of a dataset manifest (storage/manifest.h: {"keys": [{"name", "dtype", "shape"}]}).
common::Result<std::vector<DatasetKeyShape>> DatasetKeysOf(const nlohmann::json& manifest);

}  // namespace api
