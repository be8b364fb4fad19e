// The little of the HDF5 C API the importer needs, behind handles that close themselves and
// calls that return Status: open a file read-only, list a group's members, read a whole dataset
// into an Array (with its element type mapped onto ours), read string attributes and string
// lists. HDF5's own error printing is switched off; its failures become our errors, which
// name the file and the object.
//
// The serial libhdf5 is not thread-safe: one thread at a time may use these.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "storage/episode.h"

namespace storage {

// Owns an hid_t and closes it with the matching H5*close.
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  ~H5Handle() { Reset(); }
  H5Handle(H5Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = o.id_;
      o.id_ = -1;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void Reset();

 private:
  hid_t id_ = -1;
};

class Hdf5File {
 public:
  static common::Result<Hdf5File> Open(const std::string& path);
  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }

  bool Exists(const std::string& object) const;
  // Kind of a member, for listing.
  enum class Kind { kGroup, kDataset, kOther };
  struct Member {
    std::string name;
    Kind kind;
  };
  // Members of a group, in name order.
  common::Result<std::vector<Member>> List(const std::string& group) const;
  // Reads a whole dataset. Element types: 1-byte unsigned integers and 1-byte enums (h5py's
  // bool) -> u8; other integers -> i32 (refused if a value does not fit); 4-byte floats -> f32;
  // 8-byte floats -> f64. The first dimension is frames; the rest is the frame shape. `key`
  // becomes the array's name.
  common::Result<Array> ReadArray(const std::string& dataset, const std::string& key) const;
  // Dimensions of a dataset without reading it.
  common::Result<std::vector<int64_t>> Dims(const std::string& dataset) const;
  bool HasAttribute(const std::string& object, const std::string& name) const;
  common::Result<std::string> ReadStringAttribute(const std::string& object,
                                                  const std::string& name) const;
  common::Result<int64_t> ReadIntAttribute(const std::string& object,
                                           const std::string& name) const;
  // A 1-D dataset of strings (fixed-length or variable-length), e.g. mask/<filter>.
  common::Result<std::vector<std::string>> ReadStringList(const std::string& dataset) const;

 private:
  std::string path_;
  H5Handle file_;
};

}  // namespace storage
