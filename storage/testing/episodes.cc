#include "storage/testing/episodes.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "common/hash.h"

namespace storage::testing {

namespace {

using common::SplitMix64;
template <typename T>
Array Make(const std::string& name, DType dtype, std::vector<int64_t> shape, int64_t frames,
           uint64_t seed) {
  Array a;
  a.spec = {name, dtype, std::move(shape)};
  a.frames = frames;
  int64_t n = frames * a.spec.FrameElements();
  a.data.resize(static_cast<size_t>(n) * sizeof(T));
  T* v = reinterpret_cast<T*>(a.data.data());
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = SplitMix64(seed ^ static_cast<uint64_t>(i) * 0x100000001B3ull);
    if constexpr (std::is_floating_point_v<T>) {
      v[i] = static_cast<T>(static_cast<double>(r >> 11) * 0x1.0p-53 * 4 - 2);
    } else {
      v[i] = static_cast<T>(r);
    }
  }
  return a;
}
}  // namespace

Episode MakeEpisode(uint64_t seed, int64_t frames, const std::string& demo_name) {
  Episode e;
  e.arrays.push_back(Make<float>("actions", DType::kF32, {7}, frames, SplitMix64(seed * 4 + 0)));
  e.arrays.push_back(
      Make<uint8_t>("obs/image", DType::kU8, {8, 8, 3}, frames, SplitMix64(seed * 4 + 1)));
  e.arrays.push_back(Make<double>("obs/state", DType::kF64, {4}, frames, SplitMix64(seed * 4 + 2)));
  e.arrays.push_back(Make<float>("rewards", DType::kF32, {}, frames, SplitMix64(seed * 4 + 3)));
  if (!demo_name.empty()) e.attributes.emplace_back(kAttrDemoName, demo_name);
  e.attributes.emplace_back(kAttrLanguage, "pick up the red block");
  return e;
}

void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace storage::testing
