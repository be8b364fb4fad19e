#include "engine/checkpoint.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "common/file_util.h"

namespace engine {

static_assert(std::endian::native == std::endian::little,
              "checkpoint encoding assumes a little-endian host");

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'D', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8;

uint64_t Fnv1a64(const char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutFloats(std::string* out, const std::vector<float>& v) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

template <typename T>
T Get(const std::string& in, size_t* off) {
  T v;
  std::memcpy(&v, in.data() + *off, sizeof(T));
  *off += sizeof(T);
  return v;
}

std::vector<float> GetFloats(const std::string& in, size_t* off, uint64_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), in.data() + *off, n * sizeof(float));
  *off += n * sizeof(float);
  return v;
}

}  // namespace

std::string EncodeCheckpoint(const CheckpointData& d) {
  const std::string config = d.config.dump();
  const uint64_t n = d.params.size();
  std::string out;
  out.reserve(kHeaderBytes + config.size() + 3 * n * sizeof(float) + 8);
  out.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kCheckpointVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(config.size()));
  Put<uint64_t>(&out, static_cast<uint64_t>(d.step));
  Put<uint64_t>(&out, static_cast<uint64_t>(d.adam_t));
  Put<uint64_t>(&out, n);
  out.append(config);
  PutFloats(&out, d.params);
  PutFloats(&out, d.adam_m);
  PutFloats(&out, d.adam_v);
  Put<uint64_t>(&out, Fnv1a64(out.data(), out.size()));
  return out;
}

common::Result<CheckpointData> DecodeCheckpoint(const std::string& in) {
  if (in.size() < kHeaderBytes + 8 || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) {
    return common::InvalidArgument("not an Embody checkpoint (bad magic or too short)");
  }
  size_t off = sizeof(kMagic);
  uint32_t version = Get<uint32_t>(in, &off);
  if (version != kCheckpointVersion) {
    return common::InvalidArgument("unsupported checkpoint version " + std::to_string(version));
  }
  uint32_t config_bytes = Get<uint32_t>(in, &off);
  CheckpointData d;
  d.step = static_cast<int64_t>(Get<uint64_t>(in, &off));
  d.adam_t = static_cast<int64_t>(Get<uint64_t>(in, &off));
  uint64_t n = Get<uint64_t>(in, &off);
  // Check sizes before trusting n: a corrupt count must not trigger a huge allocation.
  uint64_t body = in.size() - kHeaderBytes - 8;
  if (config_bytes > body || n > (body - config_bytes) / (3 * sizeof(float)) ||
      config_bytes + 3 * n * sizeof(float) != body) {
    return common::InvalidArgument("checkpoint size does not match its header (truncated?)");
  }
  uint64_t want;
  std::memcpy(&want, in.data() + in.size() - 8, 8);
  if (Fnv1a64(in.data(), in.size() - 8) != want) {
    return common::InvalidArgument("checkpoint checksum mismatch (corrupt file)");
  }
  try {
    d.config = nlohmann::json::parse(in.substr(off, config_bytes));
  } catch (const std::exception& e) {
    return common::InvalidArgument(std::string("checkpoint config is not JSON: ") + e.what());
  }
  off += config_bytes;
  d.params = GetFloats(in, &off, n);
  d.adam_m = GetFloats(in, &off, n);
  d.adam_v = GetFloats(in, &off, n);
  return d;
}

common::Result<int64_t> SaveCheckpoint(const std::string& path, const CheckpointData& data) {
  if (data.adam_m.size() != data.params.size() || data.adam_v.size() != data.params.size()) {
    return common::Internal("checkpoint optimizer state does not match the parameter count");
  }
  std::string bytes = EncodeCheckpoint(data);
  EMBODY_RETURN_IF_ERROR(common::WriteFileAtomic(path, bytes));
  return static_cast<int64_t>(bytes.size());
}

common::Result<CheckpointData> LoadCheckpoint(const std::string& path) {
  auto bytes = common::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  auto d = DecodeCheckpoint(*bytes);
  if (!d.ok()) return common::InvalidArgument(path + ": " + d.status().message());
  return d;
}

std::string CheckpointPath(const std::string& dir, int64_t step) {
  return (std::filesystem::path(dir) / ("step-" + std::to_string(step) + ".ckpt")).string();
}

common::Result<std::vector<int64_t>> ListCheckpointSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "step-", kSuffix = ".ckpt";
    if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
        !name.ends_with(kSuffix)) {
      continue;
    }
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size() - kSuffix.size();
    int64_t step = 0;
    auto [ptr, err] = std::from_chars(first, last, step);
    if (err == std::errc() && ptr == last) steps.push_back(step);
  }
  if (ec) return common::Internal("list " + dir + ": " + ec.message());
  std::sort(steps.begin(), steps.end());
  return steps;
}

common::Status PruneCheckpoints(const std::string& dir, int keep) {
  auto steps = ListCheckpointSteps(dir);
  if (!steps.ok()) return steps.status();
  const size_t n = steps->size();
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 0)) < n; ++i) {
    std::error_code ec;
    std::filesystem::remove(CheckpointPath(dir, (*steps)[i]), ec);
    if (ec) return common::Internal("remove checkpoint: " + ec.message());
  }
  return common::Status::Ok();
}

}  // namespace engine
