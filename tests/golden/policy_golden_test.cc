// The policy transformer against PyTorch: tests/golden/make_golden.py builds the same tiny model
// in float64 with torch, on a fixed packed batch, and writes the batch, the parameters, the loss,
// the velocities, two intermediate activations and every parameter gradient. This test loads the
// parameters by name into our model, runs Forward/Backward in float32 and compares everything.
// Regenerate the file with /usr/bin/python3 tests/golden/make_golden.py (needs python3-torch;
// this test does not).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model/policy_transformer.h"

namespace engine {
namespace {

struct Record {
  int dtype = 0;  // 0 f32, 1 f64, 2 i32
  std::vector<uint32_t> shape;
  std::vector<double> values;  // every dtype widened to double
  std::vector<int32_t> ints;   // i32 records

  size_t size() const { return values.size(); }
};

// Reads the format make_golden.py documents. Empty map on any error (the test then fails).
std::map<std::string, Record> LoadGolden(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::map<std::string, Record> out;
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "EMBGOLD1", 8) != 0) return {};
  auto u32 = [&] {
    uint32_t v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  const uint32_t count = u32();
  for (uint32_t r = 0; r < count && in; ++r) {
    std::string name(u32(), '\0');
    in.read(name.data(), static_cast<std::streamsize>(name.size()));
    Record rec;
    uint8_t dtype = 0;
    in.read(reinterpret_cast<char*>(&dtype), 1);
    rec.dtype = dtype;
    const uint32_t ndim = u32();
    size_t n = 1;
    for (uint32_t d = 0; d < ndim; ++d) {
      rec.shape.push_back(u32());
      n *= rec.shape.back();
    }
    rec.values.resize(n);
    if (dtype == 0) {
      std::vector<float> f(n);
      in.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(4 * n));
      for (size_t i = 0; i < n; ++i) rec.values[i] = f[i];
    } else if (dtype == 1) {
      in.read(reinterpret_cast<char*>(rec.values.data()), static_cast<std::streamsize>(8 * n));
    } else {
      rec.ints.resize(n);
      in.read(reinterpret_cast<char*>(rec.ints.data()), static_cast<std::streamsize>(4 * n));
      for (size_t i = 0; i < n; ++i) rec.values[i] = rec.ints[i];
    }
    out[name] = std::move(rec);
  }
  if (!in) return {};
  return out;
}

template <typename T>
std::vector<T> As(const Record& r) {
  return std::vector<T>(r.values.begin(), r.values.end());
}

// Our float32 values against the float64 reference: each element within rtol of its reference
// value, with a floor of rtol·(max |reference|) for elements near zero. Returns the worst ratio
// of error to allowance (≤ 1 passes).
double WorstError(const float* ours, const std::vector<double>& ref, double rtol) {
  double scale = 0.0;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  double worst = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double allow = rtol * (std::fabs(ref[i]) + 0.1 * scale) + 1e-30;
    worst = std::max(worst, std::fabs(ours[i] - ref[i]) / allow);
  }
  return worst;
}

constexpr double kRtol = 1e-4;

// The reference's (N, C) tensor with its padding slots set to zero: what a padding slot holds
// is meaningless (PyTorch runs biases through it), and the model reports zeros there, having
// computed on real tokens only.
std::vector<double> RealSlotsOnly(std::vector<double> ref, const PackedBatch& b, int C) {
  for (size_t i = 0; i < b.modality.size(); ++i) {
    if (static_cast<Modality>(b.modality[i]) != Modality::kPad) continue;
    std::fill(ref.begin() + static_cast<long>(i) * C, ref.begin() + static_cast<long>(i + 1) * C,
              0.0);
  }
  return ref;
}

class PolicyGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = LoadGolden(EMBODY_GOLDEN_FILE);
    ASSERT_FALSE(golden_.empty()) << "cannot read " << EMBODY_GOLDEN_FILE;
    const auto cfg = golden_.at("config").ints;
    ASSERT_EQ(cfg.size(), 11u);
    config_.d_model = cfg[0];
    config_.layers = cfg[1];
    config_.heads = cfg[2];
    config_.mlp = cfg[3];
    config_.vocab = cfg[4];
    config_.max_positions = cfg[5];
    config_.action_dim = cfg[6];
    config_.action_horizon = cfg[7];
    config_.causal = cfg[8] != 0;
    batch_.rows = cfg[9];
    batch_.tokens_per_row = cfg[10];
    batch_.action_dim = config_.action_dim;
    batch_.row_begin = golden_.at("batch.row_begin").ints;
    batch_.cu_seqlens = golden_.at("batch.cu_seqlens").ints;
    batch_.modality = As<uint8_t>(golden_.at("batch.modality"));
    batch_.position = golden_.at("batch.position").ints;
    batch_.sample = golden_.at("batch.sample").ints;
    batch_.index = golden_.at("batch.index").ints;
    batch_.patches = As<float>(golden_.at("batch.patches"));
    batch_.states = As<float>(golden_.at("batch.states"));
    batch_.time = As<float>(golden_.at("batch.time"));
    batch_.noisy_action = As<float>(golden_.at("batch.noisy_action"));
    batch_.target_velocity = As<float>(golden_.at("batch.target_velocity"));
    batch_.loss_weight = As<float>(golden_.at("batch.loss_weight"));
  }

  // Loads every parameter by name; fails on a missing or mis-shaped tensor.
  std::unique_ptr<PolicyTransformer> LoadModel(AttentionKind kind) {
    PolicyConfig c = config_;
    c.attention = kind;
    auto m = PolicyTransformer::Create(c);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    size_t loaded = 0;
    for (const ParamTensor& t : (*m)->layout().tensors()) {
      auto it = golden_.find("param." + t.name);
      EXPECT_NE(it, golden_.end()) << "golden file lacks " << t.name;
      if (it == golden_.end()) continue;
      EXPECT_EQ(std::vector<int>(it->second.shape.begin(), it->second.shape.end()), t.shape)
          << t.name;
      EXPECT_EQ(it->second.size(), t.size) << t.name;
      if (it->second.size() != t.size) continue;
      for (size_t i = 0; i < t.size; ++i) {
        (*m)->params()[t.offset + i] = static_cast<float>(it->second.values[i]);
      }
      ++loaded;
    }
    EXPECT_EQ(loaded, (*m)->layout().tensors().size());
    return std::move(*m);
  }

  std::map<std::string, Record> golden_;
  PolicyConfig config_;
  PackedBatch batch_;
};

TEST_F(PolicyGoldenTest, BatchIsValidAndPacked) {
  ASSERT_TRUE(ValidateBatch(batch_, config_.vocab, config_.max_positions).ok());
  EXPECT_GT(batch_.num_samples(), batch_.rows);  // at least one row holds several samples
}

TEST_F(PolicyGoldenTest, LossVelocitiesAndGradientsMatchPyTorch) {
  auto m = LoadModel(AttentionKind::kVarlen);
  m->ZeroGrad();
  auto loss = m->Forward(batch_);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  const double ref_loss = golden_.at("out.loss").values[0];
  EXPECT_NEAR(*loss, ref_loss, kRtol * std::fabs(ref_loss));
  const Record& vel = golden_.at("out.velocity");
  ASSERT_EQ(vel.size(), static_cast<size_t>(batch_.num_actions()) * config_.action_dim);
  EXPECT_LE(WorstError(m->velocity(), vel.values, kRtol), 1.0) << "velocity";
  EXPECT_LE(WorstError(m->embeddings(), golden_.at("out.embed").values, kRtol), 1.0) << "embed";
  EXPECT_LE(WorstError(m->final_hidden(),
                       RealSlotsOnly(golden_.at("out.final_hidden").values, batch_, config_.d_model),
                       kRtol),
            1.0)
      << "final hidden";
  ASSERT_TRUE(m->Backward().ok());
  int checked = 0;
  double worst_overall = 0.0;
  for (const ParamTensor& t : m->layout().tensors()) {
    const Record& g = golden_.at("grad." + t.name);
    ASSERT_EQ(g.size(), t.size) << t.name;
    const double worst = WorstError(m->grads() + t.offset, g.values, kRtol);
    EXPECT_LE(worst, 1.0) << "gradient of " << t.name << ": worst error " << worst
                          << " × the allowance";
    worst_overall = std::max(worst_overall, worst);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(m->layout().tensors().size()));
  std::printf("worst gradient error: %.3g of the allowance (rtol %.0e)\n", worst_overall, kRtol);
}

// The comparison can fail: the same parameters with causal attention, or a padded-attention
// model on this packed batch, do not reproduce the golden values.
TEST_F(PolicyGoldenTest, DetectsADifferentModel) {
  config_.causal = !config_.causal;
  auto m = LoadModel(AttentionKind::kVarlen);
  auto loss = m->Forward(batch_);
  ASSERT_TRUE(loss.ok());
  EXPECT_GT(WorstError(m->velocity(), golden_.at("out.velocity").values, kRtol), 10.0);
  auto padded = LoadModel(AttentionKind::kPadded);
  EXPECT_FALSE(padded->Forward(batch_).ok());  // several samples per row: refused, not wrong
}

}  // namespace
}  // namespace engine
