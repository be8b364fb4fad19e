#include "api/dataset_fit.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace api {
namespace {

bool IsObs(const DatasetKeyShape& k) { return k.name.rfind("obs/", 0) == 0; }

const DatasetKeyShape* Find(const std::vector<DatasetKeyShape>& keys, const std::string& name,
                            size_t* index) {
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].name == name) {
      *index = i;
      return &keys[i];
    }
  }
  return nullptr;
}

std::string KeyList(const std::vector<DatasetKeyShape>& keys,
                    bool (*pred)(const DatasetKeyShape&)) {
  std::string out;
  for (const auto& k : keys) {
    if (pred(k)) out += (out.empty() ? "" : ", ") + k.name;
  }
  return out.empty() ? "none" : out;
}

std::string Describe(const DatasetKeyShape& k) {
  std::string s = k.name + " " + k.dtype + " (";
  for (size_t i = 0; i < k.shape.size(); ++i) s += (i ? "," : "") + std::to_string(k.shape[i]);
  return s + ")";
}

// robomimic's usual low-dim observation for image policies, else LIBERO's robot state, else
// every low-dim obs key.
std::vector<std::string> DefaultProprio(const std::vector<DatasetKeyShape>& keys) {
  size_t unused;
  auto all_present = [&](const std::vector<std::string>& names) {
    for (const auto& n : names) {
      const DatasetKeyShape* k = Find(keys, n, &unused);
      if (k == nullptr || !IsLowDimObsKey(*k)) return false;
    }
    return true;
  };
  const std::vector<std::string> robomimic = {"obs/robot0_eef_pos", "obs/robot0_eef_quat",
                                              "obs/robot0_gripper_qpos"};
  const std::vector<std::string> robomimic_no_quat = {"obs/robot0_eef_pos",
                                                      "obs/robot0_gripper_qpos"};
  const std::vector<std::string> libero = {"obs/joint_states", "obs/gripper_states"};
  if (all_present(robomimic)) return robomimic;
  if (all_present(robomimic_no_quat)) return robomimic_no_quat;
  if (all_present(libero)) return libero;
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (IsLowDimObsKey(k)) out.push_back(k.name);
  }
  return out;
}

}  // namespace

bool IsImageKey(const DatasetKeyShape& k) {
  return IsObs(k) && k.dtype == "u8" && k.shape.size() == 3;
}

bool IsLowDimObsKey(const DatasetKeyShape& k) { return IsObs(k) && !IsImageKey(k); }

int64_t FrameElements(const DatasetKeyShape& k) {
  int64_t n = 1;
  for (int64_t d : k.shape) n *= d;
  return n;
}

common::Result<DatasetFit> FitDataset(const std::vector<DatasetKeyShape>& keys,
                                      const DataOptions& data, int action_dim,
                                      const std::string& where) {
  DatasetFit fit;

  const DatasetKeyShape* act = Find(keys, "actions", &fit.actions);
  if (act == nullptr) return common::InvalidArgument(where + ": the dataset has no actions key");
  if (act->shape.size() != 1 || act->dtype == "u8") {
    return common::InvalidArgument(
        where + ": actions must be numeric (T, action_dim), found " + Describe(*act));
  }
  if (act->shape[0] != action_dim) {
    return common::InvalidArgument(
        where + ": the dataset's actions have " + std::to_string(act->shape[0]) +
            " dimensions but engine.model.action_dim is " + std::to_string(action_dim) +
            "; set it to " + std::to_string(act->shape[0]),
        "engine.model.action_dim");
  }

  std::vector<std::string> cams = data.cameras;
  if (cams.empty()) {
    for (const auto& k : keys) {
      if (IsImageKey(k)) cams.push_back(k.name);
    }
  }
  for (const auto& name : cams) {
    size_t index;
    const DatasetKeyShape* k = Find(keys, name, &index);
    if (k == nullptr || !IsImageKey(*k)) {
      return common::InvalidArgument(where + ": camera " + name +
                                         " is not an image key of the dataset (image keys: " +
                                         KeyList(keys, IsImageKey) + ")",
                                     "engine.data.cameras");
    }
    const int64_t ch = k->shape[2];
    if (ch != 1 && ch != 3 && ch != 4) {
      return common::InvalidArgument(where + ": camera " + Describe(*k) +
                                         " must have 1, 3 or 4 channels",
                                     "engine.data.cameras");
    }
    fit.cameras.push_back(index);
  }

  const std::vector<std::string> prop = data.proprio.empty() ? DefaultProprio(keys) : data.proprio;
  int64_t width = 0;
  std::string widths;
  for (const auto& name : prop) {
    size_t index;
    const DatasetKeyShape* k = Find(keys, name, &index);
    if (k == nullptr || !IsLowDimObsKey(*k)) {
      return common::InvalidArgument(where + ": proprio key " + name +
                                         " is not a low-dimensional obs key of the dataset "
                                         "(those are: " +
                                         KeyList(keys, IsLowDimObsKey) + ")",
                                     "engine.data.proprio");
    }
    width += FrameElements(*k);
    widths += (widths.empty() ? "" : " + ") + name + " (" + std::to_string(FrameElements(*k)) +
              ")";
    fit.proprio.push_back(index);
  }
  constexpr int64_t kMaxWidth = static_cast<int64_t>(kStateTokenValues) * kMaxStateTokens;
  if (width > kMaxWidth) {
    return common::InvalidArgument(where + ": proprio keys " + widths + " = " +
                                       std::to_string(width) + " values, more than the " +
                                       std::to_string(kMaxWidth) + " of " +
                                       std::to_string(kMaxStateTokens) + " state tokens of " +
                                       std::to_string(kStateTokenValues) +
                                       "; name fewer keys in engine.data.proprio",
                                   "engine.data.proprio");
  }
  fit.state_width = static_cast<int>(width);
  fit.state_tokens =
      std::max(1, static_cast<int>((width + kStateTokenValues - 1) / kStateTokenValues));
  return fit;
}

common::Result<std::vector<DatasetKeyShape>> DatasetKeysOf(const nlohmann::json& manifest) {
  std::vector<DatasetKeyShape> keys;
  if (!manifest.is_object() || !manifest.contains("keys") || !manifest["keys"].is_array()) {
    return common::InvalidArgument("the dataset's manifest lists no keys");
  }
  for (const auto& k : manifest["keys"]) {
    if (!k.is_object() || !k.contains("name") || !k["name"].is_string() || !k.contains("dtype") ||
        !k["dtype"].is_string() || !k.contains("shape") || !k["shape"].is_array()) {
      return common::InvalidArgument("the dataset's manifest has a malformed key: " +
                                     k.dump().substr(0, 200));
    }
    DatasetKeyShape s;
    s.name = k["name"].get<std::string>();
    s.dtype = k["dtype"].get<std::string>();
    for (const auto& d : k["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return common::InvalidArgument("the dataset's manifest has a malformed shape for key " +
                                       s.name);
      }
      s.shape.push_back(d.get<int64_t>());
    }
    keys.push_back(std::move(s));
  }
  return keys;
}

}  // namespace api
