#include "engine/testing/reach_hdf5.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/hash.h"
#include "storage/hdf5_importer.h"
#include "storage/testing/robomimic_file.h"

namespace engine::testing {
namespace {

using common::SplitMix64;

using storage::testing::Hdf5Writer;

// Uniform in [-1, 1) from (seed, a, b).
double Uniform(uint64_t seed, uint64_t a, uint64_t b) {
  const uint64_t bits = SplitMix64(SplitMix64(seed ^ (a << 20)) ^ b);
  return static_cast<double>(bits >> 11) * 0x1.0p-53 * 2 - 1;
}

}  // namespace

common::Status WriteReachHdf5(const std::string& path, const ReachHdf5Spec& spec) {
  EMBODY_ASSIGN_OR_RETURN(w, Hdf5Writer::Create(path));
  EMBODY_RETURN_IF_ERROR(w.CreateGroup("data"));
  EMBODY_RETURN_IF_ERROR(w.WriteStringAttribute(
      "data", "env_args", R"({"env_name": "Reach", "type": 1, "env_kwargs": {}})"));
  if (!spec.language.empty()) {
    EMBODY_RETURN_IF_ERROR(w.WriteStringAttribute(
        "data", "problem_info", R"({"language_instruction": ")" + spec.language + R"("})"));
  }
  const int T = spec.frames, A = spec.action_dim, S = spec.image_size;
  for (int d = 0; d < spec.demos; ++d) {
    const std::string g = "data/demo_" + std::to_string(d);
    double goal[3], p[3];
    for (int j = 0; j < 3; ++j) {
      goal[j] = 0.8 * Uniform(spec.seed, d, j);
      p[j] = 0.8 * Uniform(spec.seed, d, 10 + j);
    }
    std::vector<double> actions(static_cast<size_t>(T) * A), eef(static_cast<size_t>(T) * 3),
        quat(static_cast<size_t>(T) * 4), grip(static_cast<size_t>(T) * 2);
    std::vector<double> rewards(T, 0.0);
    std::vector<int64_t> dones(T, 0);
    std::vector<uint8_t> image(static_cast<size_t>(T) * S * S * 3);
    // The goal blob does not move within a demo; render it once.
    std::vector<uint8_t> frame(static_cast<size_t>(S) * S * 3);
    const double cx = (goal[0] + 1) / 2 * S, cy = (goal[1] + 1) / 2 * S;
    const double radius = S * (0.08 + 0.04 * (goal[2] + 1));
    for (int y = 0; y < S; ++y) {
      for (int x = 0; x < S; ++x) {
        const double r2 =
            ((x + 0.5 - cx) * (x + 0.5 - cx) + (y + 0.5 - cy) * (y + 0.5 - cy)) / (radius * radius);
        const double v = std::exp(-r2);
        uint8_t* px = &frame[(static_cast<size_t>(y) * S + x) * 3];
        px[0] = static_cast<uint8_t>(std::lround(20 + 235 * v));
        px[1] = static_cast<uint8_t>(std::lround(20 + 120 * v));
        px[2] = 20;
      }
    }
    for (int t = 0; t < T; ++t) {
      std::copy(frame.begin(), frame.end(), image.begin() + static_cast<size_t>(t) * S * S * 3);
      double dist = 0;
      for (int j = 0; j < 3; ++j) {
        eef[t * 3 + j] = p[j];
        dist += (goal[j] - p[j]) * (goal[j] - p[j]);
      }
      dist = std::sqrt(dist);
      for (int j = 0; j < 4; ++j) quat[t * 4 + j] = j == 3 ? 1.0 : 0.1 * p[j % 3];
      const double close = dist < 0.2 ? 1.0 : -1.0;
      grip[t * 2] = 0.04 * close;
      grip[t * 2 + 1] = -0.04 * close;
      for (int j = 0; j < A; ++j) {
        double a;
        if (j < 3) {
          a = std::clamp(2.0 * (goal[j] - p[j]), -1.0, 1.0);
        } else if (j == A - 1) {
          a = close;
        } else {
          a = 0.5 * p[j % 3];
        }
        actions[static_cast<size_t>(t) * A + j] = a;
      }
      for (int j = 0; j < 3; ++j) p[j] += 0.1 * actions[static_cast<size_t>(t) * A + j];
    }
    rewards[T - 1] = 1.0;
    dones[T - 1] = 1;
    EMBODY_RETURN_IF_ERROR(
        w.WriteDataset(g + "/actions", Hdf5Writer::Type::kF64, {T, A}, actions.data()));
    EMBODY_RETURN_IF_ERROR(
        w.WriteDataset(g + "/rewards", Hdf5Writer::Type::kF64, {T}, rewards.data()));
    EMBODY_RETURN_IF_ERROR(w.WriteDataset(g + "/dones", Hdf5Writer::Type::kI64, {T}, dones.data()));
    EMBODY_RETURN_IF_ERROR(w.WriteDataset(g + "/obs/agentview_image", Hdf5Writer::Type::kU8,
                                          {T, S, S, 3}, image.data()));
    EMBODY_RETURN_IF_ERROR(
        w.WriteDataset(g + "/obs/robot0_eef_pos", Hdf5Writer::Type::kF64, {T, 3}, eef.data()));
    EMBODY_RETURN_IF_ERROR(
        w.WriteDataset(g + "/obs/robot0_eef_quat", Hdf5Writer::Type::kF64, {T, 4}, quat.data()));
    EMBODY_RETURN_IF_ERROR(w.WriteDataset(g + "/obs/robot0_gripper_qpos", Hdf5Writer::Type::kF64,
                                          {T, 2}, grip.data()));
    EMBODY_RETURN_IF_ERROR(w.WriteIntAttribute(g, "num_samples", T));
  }
  return common::Status::Ok();
}

common::Result<std::string> MakeReachDataset(const std::string& dir, const ReachHdf5Spec& spec,
                                             int shard_kib, int chunk_bytes,
                                             storage::TokenMapping mapping) {
  const std::string hdf5 = dir + "/reach.hdf5";
  EMBODY_RETURN_IF_ERROR(WriteReachHdf5(hdf5, spec));
  storage::Hdf5ImportOptions o;
  o.writer.shard_bytes = static_cast<uint64_t>(shard_kib) << 10;
  o.writer.shard.chunk_bytes = static_cast<uint64_t>(chunk_bytes);
  o.writer.mapping = mapping;
  const std::string out = dir + "/dataset";
  EMBODY_ASSIGN_OR_RETURN(imported, storage::ImportHdf5(hdf5, out, o));
  (void)imported;
  return out;
}

}  // namespace engine::testing
