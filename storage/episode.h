// An episode in memory: named arrays with one row per frame, plus text attributes. This is the
// unit every importer produces and every writer consumes, whatever the source (HDF5 today; video
// and the built-in simulators later), so it knows nothing of files.
//
// Every array of an episode has the same number of frames. A key's per-frame shape is fixed for
// a whole dataset (its Schema): obs/agentview_image is (84,84,3) u8 in every episode, actions is
// (7) f64. A scalar per frame (rewards, dones) has the empty shape.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "storage/dtype.h"

namespace storage {

// Name, element type and per-frame shape of one key.
struct KeySpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> frame_shape;

  int64_t FrameElements() const;
  int64_t FrameBytes() const { return FrameElements() * static_cast<int64_t>(DTypeSize(dtype)); }
  bool operator==(const KeySpec& o) const {
    return name == o.name && dtype == o.dtype && frame_shape == o.frame_shape;
  }
  // "obs/agentview_image u8 (84,84,3)" for messages.
  std::string ToString() const;
};

// The keys of a dataset, in a fixed order (the order episodes store them in).
using Schema = std::vector<KeySpec>;

// One key's data: frames × FrameBytes() bytes, little-endian, row-major.
struct Array {
  KeySpec spec;
  int64_t frames = 0;
  std::vector<uint8_t> data;
};

// Attribute names the format gives a meaning to; any other name is carried along unread.
inline constexpr char kAttrLanguage[] = "language_instruction";
inline constexpr char kAttrSourceFile[] = "source_file";
inline constexpr char kAttrDemoName[] = "demo";

struct Episode {
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<Array> arrays;

  int64_t frames() const { return arrays.empty() ? 0 : arrays.front().frames; }
  Schema schema() const;
  // Value of an attribute, "" when absent.
  std::string Attribute(const std::string& name) const;
  const Array* Find(const std::string& key) const;
  // Every array holds `frames` rows of its spec's size, all frame counts agree, key names are
  // unique and non-empty. `what` names the episode in the error.
  common::Status Validate(const std::string& what) const;
};

}  // namespace storage
