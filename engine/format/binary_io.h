// The little-endian binary encoding both checkpoint formats use (engine/format/checkpoint.h, the fp32
// training checkpoint; engine/format/fp8_checkpoint.h, the FP8 weights): values appended as their bytes,
// a bounds-checked reader over a body, and the FNV-1a 64 checksum that ends each file. Not a
// general serialisation library: no versioning or schema here, that is each format's own.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/hash.h"

namespace engine {

static_assert(std::endian::native == std::endian::little,
              "checkpoint encoding assumes a little-endian host");

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
void PutArray(std::string* out, const std::vector<T>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Bounds-checked reads over the first `limit` bytes of `in` (a body, without its checksum).
// Every read returns false, consuming nothing, when fewer bytes are left than it asks.
class BinaryReader {
 public:
  BinaryReader(const std::string& in, size_t limit) : in_(in), limit_(limit) {}
  size_t left() const { return limit_ - off_; }
  template <typename T>
  bool Get(T* v) {
    if (left() < sizeof(T)) return false;
    std::memcpy(v, in_.data() + off_, sizeof(T));
    off_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool GetArray(uint64_t n, std::vector<T>* v) {
    if (n > left() / sizeof(T)) return false;
    v->resize(n);
    std::memcpy(v->data(), in_.data() + off_, n * sizeof(T));
    off_ += n * sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, std::string* out) {
    if (left() < n) return false;
    out->assign(in_.data() + off_, n);
    off_ += n;
    return true;
  }

 private:
  const std::string& in_;
  size_t limit_;
  size_t off_ = 0;
};

// FNV-1a, 64 bits: the checksum of a checkpoint's body.
inline uint64_t CheckpointChecksum(const char* p, size_t n) { return common::Fnv1a64Bytes(p, n); }

}  // namespace engine
