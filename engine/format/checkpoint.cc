#include "engine/format/checkpoint.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "common/file_util.h"
#include "engine/format/binary_io.h"

namespace engine {
namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'D', 'C', 'K', 'P', 'T'};
// magic, version, config_bytes, step, adam_t, param_count
constexpr size_t kHeaderBytesV1 = 8 + 4 + 4 + 8 + 8 + 8;
// ... then data_seed, data_next, data_epoch, rng_count, reserved
constexpr size_t kHeaderBytesV2 = kHeaderBytesV1 + 8 + 8 + 8 + 4 + 4;
// ... then data_in_epoch, dataset_samples, dataset_fingerprint
constexpr size_t kHeaderBytesV3 = kHeaderBytesV2 + 8 + 8 + 8;
constexpr size_t kMaxRngNameBytes = 256;

common::Status Truncated() {
  return common::InvalidArgument("checkpoint size does not match its header (truncated?)");
}

}  // namespace

std::string EncodeCheckpoint(const CheckpointData& d) {
  const std::string config = d.config.dump();
  const uint64_t n = d.params.size();
  std::string out;
  out.reserve(kHeaderBytesV3 + config.size() + (3 * n + d.grad_residuals.size()) * sizeof(float) +
              8 + 64 * d.rng.size());
  out.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kCheckpointVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(config.size()));
  Put<uint64_t>(&out, static_cast<uint64_t>(d.step));
  Put<uint64_t>(&out, static_cast<uint64_t>(d.adam_t));
  Put<uint64_t>(&out, n);
  Put<uint64_t>(&out, d.data.seed);
  Put<uint64_t>(&out, d.data.next_sample);
  Put<uint64_t>(&out, d.data.epoch);
  Put<uint32_t>(&out, static_cast<uint32_t>(d.rng.size()));
  Put<uint32_t>(&out, d.grad_residual_ranks);
  Put<uint64_t>(&out, d.data.in_epoch);
  Put<uint64_t>(&out, d.data.dataset_samples);
  Put<uint64_t>(&out, d.data.dataset_fingerprint);
  out.append(config);
  for (const auto& [name, state] : d.rng) {
    Put<uint32_t>(&out, static_cast<uint32_t>(name.size()));
    out.append(name);
    Put<uint64_t>(&out, state);
  }
  PutArray(&out, d.params);
  PutArray(&out, d.adam_m);
  PutArray(&out, d.adam_v);
  PutArray(&out, d.grad_residuals);
  Put<uint64_t>(&out, CheckpointChecksum(out.data(), out.size()));
  return out;
}

common::Result<CheckpointData> DecodeCheckpoint(const std::string& in) {
  if (in.size() < kHeaderBytesV1 + 8 || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) {
    return common::InvalidArgument("not an Embody checkpoint (bad magic or too short)");
  }
  // Checksum first: nothing read from a corrupt file is trusted, sizes included.
  uint64_t want;
  std::memcpy(&want, in.data() + in.size() - 8, 8);
  if (CheckpointChecksum(in.data(), in.size() - 8) != want) {
    return common::InvalidArgument("checkpoint checksum mismatch (corrupt or truncated file)");
  }
  BinaryReader r(in, in.size() - 8);
  std::string magic;
  uint32_t version = 0, config_bytes = 0;
  r.GetBytes(sizeof(kMagic), &magic);
  r.Get(&version);
  if (version < 1 || version > kCheckpointVersion) {
    return common::InvalidArgument("unsupported checkpoint version " + std::to_string(version));
  }
  CheckpointData d;
  uint64_t step = 0, adam_t = 0, n = 0;
  if (!r.Get(&config_bytes) || !r.Get(&step) || !r.Get(&adam_t) || !r.Get(&n)) return Truncated();
  d.step = static_cast<int64_t>(step);
  d.adam_t = static_cast<int64_t>(adam_t);
  uint32_t rng_count = 0, reserved = 0;
  if (version == 1) {
    d.has_data_position = false;
  } else if (!r.Get(&d.data.seed) || !r.Get(&d.data.next_sample) || !r.Get(&d.data.epoch) ||
             !r.Get(&rng_count) || !r.Get(&reserved)) {
    return Truncated();
  } else if (version >= 3 && (!r.Get(&d.data.in_epoch) || !r.Get(&d.data.dataset_samples) ||
                              !r.Get(&d.data.dataset_fingerprint))) {
    return Truncated();
  }
  // Version 2 files come from the built-in stream only: no dataset, no position in an epoch.
  std::string config;
  if (!r.GetBytes(config_bytes, &config)) return Truncated();
  try {
    d.config = nlohmann::json::parse(config);
  } catch (const std::exception& e) {
    return common::InvalidArgument(std::string("checkpoint config is not JSON: ") + e.what());
  }
  for (uint32_t i = 0; i < rng_count; ++i) {
    uint32_t name_bytes = 0;
    std::string name;
    uint64_t state = 0;
    if (!r.Get(&name_bytes) || name_bytes > kMaxRngNameBytes || !r.GetBytes(name_bytes, &name) ||
        !r.Get(&state)) {
      return Truncated();
    }
    d.rng[name] = state;
  }
  // Before version 4 the residual word was reserved (0).
  const uint64_t ranks = version >= 4 ? reserved : 0;
  // Check n against what is left before allocating: a bad count must not allocate gigabytes.
  if (n > r.left() / (3 * sizeof(float)) || ranks > r.left() / sizeof(float)) return Truncated();
  const uint64_t residuals = n * ranks;
  if ((ranks > 0 && residuals / ranks != n) ||
      r.left() / sizeof(float) != 3 * n + residuals || r.left() % sizeof(float) != 0) {
    return Truncated();
  }
  r.GetArray(n, &d.params);
  r.GetArray(n, &d.adam_m);
  r.GetArray(n, &d.adam_v);
  d.grad_residual_ranks = static_cast<uint32_t>(ranks);
  r.GetArray(residuals, &d.grad_residuals);
  return d;
}

common::Result<int64_t> SaveCheckpoint(const std::string& path, const CheckpointData& data) {
  if (data.adam_m.size() != data.params.size() || data.adam_v.size() != data.params.size()) {
    return common::Internal("checkpoint optimizer state does not match the parameter count");
  }
  if (data.grad_residuals.size() != data.params.size() * data.grad_residual_ranks) {
    return common::Internal("checkpoint fp8 residuals do not match ranks x parameters");
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

namespace {
// The step of a checkpoint file name written by CheckpointPath ("step-N.ckpt"), if it is one.
std::optional<int64_t> ParseCheckpointStep(std::string_view name) {
  constexpr std::string_view kPrefix = "step-", kSuffix = ".ckpt";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size() - kSuffix.size();
  int64_t step = 0;
  auto [ptr, err] = std::from_chars(first, last, step);
  if (err != std::errc() || ptr != last) return std::nullopt;
  return step;
}
}  // namespace

common::Result<std::vector<int64_t>> ListCheckpointSteps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (auto step = ParseCheckpointStep(entry.path().filename().string())) steps.push_back(*step);
  }
  if (ec) return common::Internal("list " + dir + ": " + ec.message());
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string NewestCheckpointFrom(const std::string& path) {
  std::filesystem::path p(path);
  auto steps = ListCheckpointSteps(p.parent_path().string());
  if (!steps.ok() || steps->empty()) return path;
  const int64_t newest = steps->back();
  // The step the name asks for; a name that is not step-N.ckpt asks for nothing newer.
  const int64_t named = ParseCheckpointStep(p.filename().string()).value_or(newest + 1);
  if (newest < named) return path;
  return CheckpointPath(p.parent_path().string(), newest);
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
