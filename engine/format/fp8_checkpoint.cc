#include "engine/format/fp8_checkpoint.h"

#include <cmath>
#include <cstring>

#include "common/file_util.h"
#include "engine/format/binary_io.h"

namespace engine {
namespace {

constexpr char kFp8Magic[8] = {'E', 'M', 'B', 'D', 'F', 'P', '8', 'W'};
constexpr size_t kMaxNameBytes = 256;
constexpr uint32_t kMaxTensors = 1 << 16;
constexpr uint32_t kMaxSlices = 16;
constexpr uint32_t kMaxSide = 1 << 24;

common::Status Corrupt(const std::string& what) {
  return common::InvalidArgument("not a valid FP8 checkpoint: " + what);
}

}  // namespace

std::string EncodeFp8Checkpoint(const Fp8CheckpointData& d) {
  const std::string config = d.config.dump();
  std::string out(kFp8Magic, sizeof kFp8Magic);
  Put<uint32_t>(&out, kFp8CheckpointVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(config.size()));
  Put<uint64_t>(&out, static_cast<uint64_t>(d.step));
  Put<uint32_t>(&out, static_cast<uint32_t>(d.tensors.size()));
  Put<uint32_t>(&out, 0);
  out += config;
  for (const Fp8CheckpointTensor& t : d.tensors) {
    Put<uint32_t>(&out, static_cast<uint32_t>(t.name.size()));
    out += t.name;
    Put<uint8_t>(&out, t.is_fp8() ? 1 : 0);
    Put<uint8_t>(&out, t.is_fp8() && t.fp8[0].format == fp8::Format::kE5M2 ? 1 : 0);
    Put<uint16_t>(&out, static_cast<uint16_t>(t.fp8.size()));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.rows));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.cols));
    if (!t.is_fp8()) {
      PutArray(&out, t.values);
      continue;
    }
    for (const fp8::Fp8Matrix& m : t.fp8) {
      PutArray(&out, m.codes);
      PutArray(&out, m.scales);
    }
  }
  Put<uint64_t>(&out, CheckpointChecksum(out.data(), out.size()));
  return out;
}

common::Result<Fp8CheckpointData> DecodeFp8Checkpoint(const std::string& in) {
  if (in.size() < sizeof kFp8Magic + 8 ||
      std::memcmp(in.data(), kFp8Magic, sizeof kFp8Magic) != 0) {
    return Corrupt("bad magic (an fp32 training checkpoint is quantised with "
                   "`embody-engine quantize`)");
  }
  uint64_t want;
  std::memcpy(&want, in.data() + in.size() - 8, 8);
  if (CheckpointChecksum(in.data(), in.size() - 8) != want) return Corrupt("checksum mismatch");
  BinaryReader r(in, in.size() - 8);
  std::string magic;
  uint32_t version = 0, config_bytes = 0, count = 0, reserved = 0;
  uint64_t step = 0;
  if (!r.GetBytes(sizeof kFp8Magic, &magic) || !r.Get(&version) || !r.Get(&config_bytes) ||
      !r.Get(&step) || !r.Get(&count) || !r.Get(&reserved)) {
    return Corrupt("truncated header");
  }
  if (version != kFp8CheckpointVersion) {
    return Corrupt("version " + std::to_string(version) + ", this engine reads " +
                   std::to_string(kFp8CheckpointVersion));
  }
  if (count > kMaxTensors) return Corrupt(std::to_string(count) + " tensors");
  Fp8CheckpointData d;
  d.step = static_cast<int64_t>(step);
  std::string config;
  if (!r.GetBytes(config_bytes, &config)) return Corrupt("truncated config");
  d.config = nlohmann::json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (!d.config.is_object()) return Corrupt("config is not a JSON object");
  for (uint32_t i = 0; i < count; ++i) {
    Fp8CheckpointTensor t;
    uint32_t name_bytes = 0, rows = 0, cols = 0;
    uint8_t kind = 0, format = 0;
    uint16_t slices = 0;
    if (!r.Get(&name_bytes) || name_bytes == 0 || name_bytes > kMaxNameBytes ||
        !r.GetBytes(name_bytes, &t.name) || !r.Get(&kind) || !r.Get(&format) ||
        !r.Get(&slices) || !r.Get(&rows) || !r.Get(&cols)) {
      return Corrupt("truncated or oversized tensor header " + std::to_string(i));
    }
    if (rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide) {
      return Corrupt(t.name + ": shape " + std::to_string(rows) + " x " + std::to_string(cols));
    }
    t.rows = static_cast<int>(rows);
    t.cols = static_cast<int>(cols);
    const uint64_t n = static_cast<uint64_t>(rows) * cols;
    if (kind == 0) {
      if (slices != 0 || format != 0) return Corrupt(t.name + ": fp32 tensor with fp8 fields");
      if (!r.GetArray(n, &t.values)) return Corrupt(t.name + ": truncated values");
    } else if (kind == 1) {
      if (slices == 0 || slices > kMaxSlices || rows % slices != 0 || format > 1) {
        return Corrupt(t.name + ": " + std::to_string(slices) + " slices, format " +
                       std::to_string(format));
      }
      t.fp8.resize(slices);
      for (fp8::Fp8Matrix& m : t.fp8) {
        m.format = format == 0 ? fp8::Format::kE4M3 : fp8::Format::kE5M2;
        m.rows = static_cast<int>(rows / slices);
        m.cols = t.cols;
        m.block_rows = fp8::kBlock;
        if (!r.GetArray(static_cast<uint64_t>(m.rows) * m.cols, &m.codes) ||
            !r.GetArray(static_cast<uint64_t>(m.RowBlocks()) * m.ColBlocks(), &m.scales)) {
          return Corrupt(t.name + ": truncated fp8 slice");
        }
        for (float s : m.scales) {
          if (!std::isfinite(s) || s <= 0.0f) return Corrupt(t.name + ": a scale is not > 0");
        }
      }
    } else {
      return Corrupt(t.name + ": kind " + std::to_string(kind));
    }
    d.tensors.push_back(std::move(t));
  }
  if (r.left() != 0) return Corrupt(std::to_string(r.left()) + " trailing bytes");
  return d;
}

common::Result<int64_t> SaveFp8Checkpoint(const std::string& path, const Fp8CheckpointData& d) {
  const std::string bytes = EncodeFp8Checkpoint(d);
  EMBODY_RETURN_IF_ERROR(common::WriteFileAtomic(path, bytes));
  return static_cast<int64_t>(bytes.size());
}

common::Result<Fp8CheckpointData> LoadFp8Checkpoint(const std::string& path) {
  EMBODY_ASSIGN_OR_RETURN(bytes, common::ReadFile(path));
  auto d = DecodeFp8Checkpoint(bytes);
  if (!d.ok()) return common::InvalidArgument(path + ": " + d.status().message());
  return d;
}

}  // namespace engine
