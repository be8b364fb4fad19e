// Element types of episode arrays. The set is deliberately small: what robot datasets hold
// (camera pixels, integer flags, float32 and float64 signals). Each has a fixed one-byte code
// that is part of the shard format, so codes are never renumbered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace storage {

enum class DType : uint8_t {
  kU8 = 1,
  kI32 = 2,
  kF32 = 3,
  kF64 = 4,
};

// Bytes of one element.
size_t DTypeSize(DType t);
// "u8", "i32", "f32", "f64".
const char* DTypeName(DType t);
std::optional<DType> DTypeFromName(const std::string& name);
// The inverse of the on-disk code; nullopt for a code no version has written.
std::optional<DType> DTypeFromCode(uint8_t code);

}  // namespace storage
