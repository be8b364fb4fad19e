// Post-training FP8 quantisation: the checkpoint format round trip and its refusals, the
// quantised policy's forward against an fp32 policy holding the same (dequantised) weights, and
// a trained policy evaluated from its FP8 checkpoint against fp32 on the same held-out batch.
#include "engine/policy/ptq.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/dist/communicator.h"
#include "engine/format/binary_io.h"
#include "engine/fp8/fp8_matmul.h"
#include "engine/format/fp8_checkpoint.h"
#include "engine/model/policy_options.h"
#include "engine/report/recording_sink.h"
#include "engine/train/trainer.h"

namespace engine {
namespace {

api::EngineOptions SmallEngine() {
  api::EngineOptions e;
  e.model.d_model = 48;
  e.model.layers = 2;
  e.model.heads = 4;
  e.model.mlp = 160;  // ragged 128-blocks on both sides of fc1/fc2
  e.model.action_horizon = 4;
  e.model.action_dim = 7;
  e.data.rows_per_step = 2;
  e.data.tokens_per_row = 512;
  e.optim.lr = 4e-3;
  e.optim.steps = 120;
  e.optim.warmup_steps = 10;
  e.seed = 1;
  return e;
}

nlohmann::json ConfigOf(const api::EngineOptions& e) {
  api::JobSpec spec;
  spec.engine = e;
  return {{"engine", api::ToJson(spec)["engine"]}};
}

std::unique_ptr<PolicyTransformer> InitModel(const api::EngineOptions& e) {
  auto m = PolicyTransformer::Create(PolicyConfigFromOptions(e).value()).value();
  m->Init(5);
  return m;
}

TEST(Fp8CheckpointTest, RoundTripsBitForBit) {
  const api::EngineOptions e = SmallEngine();
  auto model = InitModel(e);
  PtqOptions opts;
  opts.action_head = true;
  QuantizedPolicy summary;
  auto d = QuantizeToFp8Checkpoint(*model, 42, ConfigOf(e), opts, &summary);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->tensors.size(), model->layout().tensors().size());
  // 4 Linears per block + the head; qkv in three slices.
  EXPECT_EQ(d->config["fp8"]["quantized"].size(), 2u * 4 + 1);
  EXPECT_GT(summary.stats.elements, 0);
  EXPECT_EQ(summary.stats.saturated, 0);  // scale = amax / 448 never clamps finite weights
  EXPECT_GT(static_cast<double>(summary.fp32_bytes) / summary.fp8_bytes, 3.0);

  const std::string path = ::testing::TempDir() + "/policy.fp8";
  auto written = SaveFp8Checkpoint(path, *d);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto back = LoadFp8Checkpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->config, d->config);
  ASSERT_EQ(back->tensors.size(), d->tensors.size());
  for (size_t i = 0; i < d->tensors.size(); ++i) {
    const Fp8CheckpointTensor &a = d->tensors[i], &b = back->tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.cols, b.cols);
    EXPECT_EQ(a.values, b.values) << a.name;
    ASSERT_EQ(a.fp8.size(), b.fp8.size()) << a.name;
    for (size_t p = 0; p < a.fp8.size(); ++p) {
      EXPECT_EQ(a.fp8[p].codes, b.fp8[p].codes) << a.name;
      EXPECT_EQ(a.fp8[p].scales, b.fp8[p].scales) << a.name;
    }
    if (a.name.ends_with("attn.qkv.weight")) {
      EXPECT_EQ(a.fp8.size(), 3u);
    }
  }
  EXPECT_EQ(EncodeFp8Checkpoint(*back), EncodeFp8Checkpoint(*d));
}

TEST(Fp8CheckpointTest, RefusesDamagedOrHostileFiles) {
  const api::EngineOptions e = SmallEngine();
  auto model = InitModel(e);
  auto d = QuantizeToFp8Checkpoint(*model, 1, ConfigOf(e), PtqOptions{}, nullptr).value();
  const std::string good = EncodeFp8Checkpoint(d);
  ASSERT_TRUE(DecodeFp8Checkpoint(good).ok());
  auto reseal = [](std::string b) {  // a valid checksum over whatever the body says
    const uint64_t h = CheckpointChecksum(b.data(), b.size() - 8);
    std::memcpy(b.data() + b.size() - 8, &h, 8);
    return b;
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  EXPECT_NE(DecodeFp8Checkpoint(flipped).status().message().find("checksum"), std::string::npos);
  EXPECT_FALSE(DecodeFp8Checkpoint(good.substr(0, good.size() - 9)).ok());
  EXPECT_FALSE(DecodeFp8Checkpoint("EMBDCKPT" + good.substr(8)).ok());  // a training checkpoint
  std::string many = good;  // tensor count far past what the file holds
  const uint32_t count = 1u << 15;
  std::memcpy(many.data() + 24, &count, 4);
  EXPECT_FALSE(DecodeFp8Checkpoint(reseal(many)).ok());
  std::string version = good;
  version[8] = 9;
  EXPECT_NE(DecodeFp8Checkpoint(reseal(version)).status().message().find("version"),
            std::string::npos);
  // A zero scale (would make 1/scale infinite in any re-quantisation, and is never written).
  Fp8CheckpointData zero = d;
  for (auto& t : zero.tensors) {
    if (t.is_fp8()) {
      t.fp8[0].scales[0] = 0.0f;
      break;
    }
  }
  EXPECT_NE(DecodeFp8Checkpoint(EncodeFp8Checkpoint(zero)).status().message().find("scale"),
            std::string::npos);
  // A checkpoint of another model shape decodes but does not load.
  Fp8CheckpointData other = d;
  other.tensors.pop_back();
  EXPECT_FALSE(PolicyFromFp8Checkpoint(other, nullptr).ok());
  Fp8CheckpointData reshaped = d;
  reshaped.tensors[0].cols += 1;
  reshaped.tensors[0].values.resize(static_cast<size_t>(reshaped.tensors[0].rows) *
                                    reshaped.tensors[0].cols);
  EXPECT_FALSE(PolicyFromFp8Checkpoint(reshaped, nullptr).ok());
}

TEST(Fp8PolicyTest, SetFp8WeightsChecksNamesAndShapes) {
  const api::EngineOptions e = SmallEngine();
  auto model = InitModel(e);
  auto q = QuantizePolicy(*model, PtqOptions{}).value();
  auto bad_name = q.weights;
  bad_name["embed.token"] = bad_name.begin()->second;
  EXPECT_FALSE(model->SetFp8Weights(bad_name).ok());
  auto bad_slices = q.weights;
  bad_slices["blocks.0.attn.qkv.weight"].pop_back();
  EXPECT_FALSE(model->SetFp8Weights(bad_slices).ok());
  auto bad_shape = q.weights;
  bad_shape["blocks.0.mlp.fc1.weight"] = bad_shape["blocks.0.mlp.fc2.weight"];
  EXPECT_FALSE(model->SetFp8Weights(bad_shape).ok());
  EXPECT_TRUE(model->fp8_weights().empty());  // nothing changed on error
  ASSERT_TRUE(model->SetFp8Weights(q.weights).ok());
  EXPECT_EQ(model->fp8_weights().size(), 2u * 4);
}

// The fp8 forward is the fp32 forward of the dequantised weights, up to summation order (and,
// where the bf16 weight-only product runs, up to rounding each product's activations to bf16):
// the quantised policy really runs its products through the fp8 matmul on its codes and scales.
TEST(Fp8PolicyTest, ForwardMatchesFp32OfDequantisedWeights) {
  const api::EngineOptions e = SmallEngine();
  auto fp32 = InitModel(e);
  PtqOptions all;
  all.embeddings = true;
  all.action_head = true;
  auto d = QuantizeToFp8Checkpoint(*fp32, 0, ConfigOf(e), all, nullptr).value();
  auto fp8 = PolicyFromFp8Checkpoint(d, nullptr).value();
  auto dequantised = InitModel(e);
  std::copy(fp8->params(), fp8->params() + fp8->num_params(), dequantised->params());
  // Dequantised weights differ from the originals (what quantising costs) ...
  double diff = 0.0;
  for (size_t i = 0; i < fp32->num_params(); ++i)
    diff += std::fabs(fp32->params()[i] - fp8->params()[i]);
  EXPECT_GT(diff, 0.0);
  // ... and the two policies agree on them.
  const ReachTask task(e.model.action_dim, e.model.action_horizon, e.seed);
  auto a = EvaluateHeldOut(*fp8, task, e, 8).value();
  auto b = EvaluateHeldOut(*dequantised, task, e, 8).value();
  ASSERT_EQ(a.actions.size(), b.actions.size());
  auto original = EvaluateHeldOut(*fp32, task, e, 8).value();
  double worst = 0.0, scale = 0.0, quantised = 0.0;
  for (size_t i = 0; i < a.actions.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a.actions[i] - b.actions[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b.actions[i])));
    quantised =
        std::max(quantised, static_cast<double>(std::fabs(a.actions[i] - original.actions[i])));
  }
  // bf16 activations: each rounding is ≤ 2^-8 relative and they are independent, so the actions
  // move far less than 2^-8 (5e-4 of 2.6 here), and far less than quantising the weights does.
  const bool bf16 = fp8::Bf16DotRuns(fp8::Format::kE4M3);
  const double bound = (bf16 ? 1.0 / 1024 : 1e-4) * std::max(1.0, scale);
  std::printf(
      "fp8 vs dequantised fp32 policy: worst %.3g (bound %.3g, %s products); fp8 vs the "
      "original fp32 policy: %.3g\n",
      worst, bound, bf16 ? "bf16" : "fp32", quantised);
  EXPECT_LT(worst, bound);
  EXPECT_GT(quantised, 2 * bound);  // the bound tells the fp8 products from the fp32 ones
  // Where it runs, a bf16 product is what inference uses (the weight-only one below
  // kFp8GemmMinRows rows, the bf16 GEMM from there): its rounding shows (fp32 activations agree
  // to 2.4e-7 here).
  if (bf16) {
    EXPECT_GT(worst, 1e-5 * std::max(1.0, scale));
  }
  // A quantised policy is not trained.
  EXPECT_FALSE(fp8->Backward().ok());
}

// A trained policy with engine.fp8.inference: the job writes its FP8 checkpoint, evaluates from
// it, and reports fp8 statistics in its eval event. Bound: on this small policy the fp8 actions
// stay within 5% (relative L2) of the fp32 ones and the action MSE within 5% of fp32's (the
// reference policy's figures are in docs/fp8.md).
TEST(Fp8PolicyTest, TrainedPolicyEvaluatesFromItsFp8Checkpoint) {
  LocalCommunicator comm;
  RecordingSink sink;
  TrainerOptions o;
  o.engine = SmallEngine();
  o.engine.fp8.inference = true;
  o.print_progress = false;
  o.eval_samples = 32;
  const std::string dir = ::testing::TempDir() + "/ptq_train";
  std::filesystem::remove_all(dir);
  o.checkpoint_dir = dir;
  auto r = Train(o, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->fp8_evaluated);
  EXPECT_LT(r->fp8_eval.relative_l2, 0.05);
  EXPECT_GT(r->fp8_eval.relative_l2, 0.0);
  EXPECT_NEAR(r->fp8_eval.mse_ratio, 1.0, 0.05)
      << "fp32 " << r->fp8_eval.fp32.action_mse << " fp8 " << r->fp8_eval.fp8.action_mse;
  EXPECT_EQ(r->eval.action_mse, r->fp8_eval.fp32.action_mse);  // the fp32 eval is the job's eval
  ASSERT_FALSE(r->fp8_checkpoint.empty());
  auto file = LoadFp8Checkpoint(r->fp8_checkpoint);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->step, o.engine.optim.steps);
  // The checkpoint alone reproduces the evaluation.
  api::EngineOptions e;
  auto reloaded = PolicyFromFp8Checkpoint(*file, &e).value();
  const ReachTask task(e.model.action_dim, e.model.action_horizon, e.seed);
  auto again = EvaluateHeldOut(*reloaded, task, e, 32).value();
  EXPECT_EQ(again.action_mse, r->fp8_eval.fp8.action_mse);
  const nlohmann::json ev = sink.events().back();
  ASSERT_EQ(ev["type"], "eval");
  ASSERT_TRUE(ev.contains("fp8"));
  for (const char* k : {"amax", "scale_min", "scale_max", "saturated", "underflowed", "elements",
                        "action_mse", "relative_l2", "weight_bytes_ratio"}) {
    EXPECT_TRUE(ev["fp8"].contains(k) && ev["fp8"][k].is_number()) << k;
  }
  EXPECT_GT(ev["fp8"]["amax"].get<double>(), 0.0);
}

}  // namespace
}  // namespace engine
