#include "storage/episode.h"

#include <set>

namespace storage {

int64_t KeySpec::FrameElements() const {
  int64_t n = 1;
  for (int64_t d : frame_shape) n *= d;
  return n;
}

std::string KeySpec::ToString() const {
  std::string s = name + " " + DTypeName(dtype) + " (";
  for (size_t i = 0; i < frame_shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(frame_shape[i]);
  }
  return s + ")";
}

Schema Episode::schema() const {
  Schema s;
  for (const Array& a : arrays) s.push_back(a.spec);
  return s;
}

std::string Episode::Attribute(const std::string& name) const {
  for (const auto& [k, v] : attributes) {
    if (k == name) return v;
  }
  return "";
}

const Array* Episode::Find(const std::string& key) const {
  for (const Array& a : arrays) {
    if (a.spec.name == key) return &a;
  }
  return nullptr;
}

common::Status Episode::Validate(const std::string& what) const {
  if (arrays.empty()) return common::InvalidArgument(what + ": episode has no arrays");
  std::set<std::string> names;
  for (const Array& a : arrays) {
    if (a.spec.name.empty()) return common::InvalidArgument(what + ": a key has an empty name");
    if (!names.insert(a.spec.name).second) {
      return common::InvalidArgument(what + ": key " + a.spec.name + " appears twice");
    }
    for (int64_t d : a.spec.frame_shape) {
      if (d <= 0)
        return common::InvalidArgument(what + ": key " + a.spec.ToString() +
                                       " has a dimension <= 0");
    }
    if (a.frames != frames()) {
      return common::InvalidArgument(what + ": key " + a.spec.name + " has " +
                                     std::to_string(a.frames) + " frames, " + arrays[0].spec.name +
                                     " has " + std::to_string(frames()));
    }
    if (static_cast<int64_t>(a.data.size()) != a.frames * a.spec.FrameBytes()) {
      return common::InvalidArgument(what + ": key " + a.spec.name + " holds " +
                                     std::to_string(a.data.size()) + " bytes, expected " +
                                     std::to_string(a.frames * a.spec.FrameBytes()));
    }
  }
  if (frames() <= 0) return common::InvalidArgument(what + ": episode has no frames");
  return common::Status::Ok();
}

}  // namespace storage
