// Pins what engine::Train produces for one short run, as recorded from the trainer before it was
// split into units (engine/train/): every step's loss bit for bit, every event with its fields
// (timings by name only: they vary from run to run), the checksums of the checkpoint files it
// writes, and a resume from the middle. Any change to the order of floating-point operations,
// to an event field or to the checkpoint bytes fails it.
//
// The figures depend on the kernels: they were recorded on the baseline ones (EMBODY_CPU_PATH=scalar,
// EMBODY_GEMM=eigen), which main() below chooses unless EMBODY_CPU_PATH names another path (ctest
// runs this binary once per path the machine has: engine/CMakeLists.txt). What is pinned, per
// quantity, on the baseline path:
// - bit for bit on every x86-64 CPU: every loss, every integer and every field of the data
//   (packing, padding, learning rate, steps), the events' fields and order, the checkpoint steps
//   and the FP8 file's size, and on one machine the checkpoint a resumed run wrote;
// - within a stated relative tolerance: what is computed from the gradients and the weights after
//   an update (grad_norm, evaluation errors, FP8 statistics) and the checkpoint bytes. These
//   differ in their last bits between CPUs even on the baseline kernels (measured: grad_norm in the
//   tenth significant digit between an AMD EPYC of family 26 and an Intel Xeon with AMX and the
//   machine the values were recorded on), through glibc's libm, which picks its exp/log variants
//   by the CPU at run time; the tolerances are far below what any change to the model would move.
// On the vector paths (avx2, avx512) the kernels sum in lanes of 8 or 16, so every floating-point
// value, losses included, may move in its last bits (measured here: 7e-8 relative at step 1): each
// is compared within kVectorPathTolerance instead, and the checkpoint bytes only for being whole.
// Integers, the data's fields, the events' order and the FP8 file's size stay exact on every path.
// A change meant to alter the numbers (a kernel, the optimizer, the data) regenerates them:
// EMBODY_PRINT_GOLDEN=1 prints the current values as C++ to paste below, and the commit says why
// they moved.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/hash.h"
#include "engine/format/checkpoint.h"
#include "engine/cpu/cpu_path.h"
#include "engine/report/recording_sink.h"
#include "engine/testing/small_run.h"
#include "engine/train/trainer.h"

namespace engine {
namespace {

// Six steps with a checkpoint every three (keep 1), evaluation during training at step 3 and 6
// (two episodes), and at the end the FP8 policy written and evaluated beside the fp32 one on
// held-out samples.
TrainerOptions GoldenRun(const std::string& dir) {
  TrainerOptions o = testing::SmallRun(6);
  o.checkpoint_dir = dir;
  o.engine.checkpoint.every_steps = 3;
  o.engine.checkpoint.keep = 1;
  o.engine.eval_every = 3;
  o.engine.eval_episodes = 2;
  o.eval_samples = 4;
  o.engine.fp8.inference = true;
  o.engine.optim.warmup_steps = 2;  // the FP8 checkpoint's options are checked as a job's
  return o;
}

// clang-format off
const float kLosses[] = {
    0x1.ddd5aep+0f, 0x1.af2d84p+0f, 0x1.c2a14cp+0f, 0x1.b9d638p+0f, 0x1.979b54p+0f, 0x1.8010cp+0f,
};

const char* const kEvents[] = {
    "{\"allreduce_seconds\":\"t\",\"backward_seconds\":\"t\",\"data_wait_seconds\":\"t\",\"forward_seconds\":\"t\",\"grad_norm\":2.959423334099091,\"loss\":1.8665417432785034,\"lr\":0.002,\"optimizer_seconds\":\"t\",\"packing_efficiency\":0.8193359375,\"padding_ratio\":0.1806640625,\"samples_per_s\":\"t\",\"step\":1,\"step_seconds\":\"t\",\"steps\":6,\"tokens_per_s\":\"t\",\"type\":\"step\",\"world_size\":1}",
    "{\"allreduce_seconds\":\"t\",\"backward_seconds\":\"t\",\"data_wait_seconds\":\"t\",\"forward_seconds\":\"t\",\"grad_norm\":2.5539310876263626,\"loss\":1.6842882633209229,\"lr\":0.004,\"optimizer_seconds\":\"t\",\"packing_efficiency\":0.802734375,\"padding_ratio\":0.197265625,\"samples_per_s\":\"t\",\"step\":2,\"step_seconds\":\"t\",\"steps\":6,\"tokens_per_s\":\"t\",\"type\":\"step\",\"world_size\":1}",
    "{\"allreduce_seconds\":\"t\",\"backward_seconds\":\"t\",\"data_wait_seconds\":\"t\",\"eval_episodes\":2,\"eval_mean_return\":-0.12718025594949722,\"eval_success_rate\":0.0,\"forward_seconds\":\"t\",\"grad_norm\":1.7805198830087334,\"loss\":1.7602736949920654,\"lr\":0.004,\"optimizer_seconds\":\"t\",\"packing_efficiency\":0.7194010416666666,\"padding_ratio\":0.28059895833333337,\"samples_per_s\":\"t\",\"step\":3,\"step_seconds\":\"t\",\"steps\":6,\"tokens_per_s\":\"t\",\"type\":\"step\",\"world_size\":1}",
    "{\"bytes\":1213283,\"path\":\"step-3.ckpt\",\"step\":3,\"type\":\"checkpoint\"}",
    "{\"allreduce_seconds\":\"t\",\"backward_seconds\":\"t\",\"data_wait_seconds\":\"t\",\"forward_seconds\":\"t\",\"grad_norm\":1.4856052741993833,\"loss\":1.7259249687194824,\"lr\":0.0031000000000000003,\"optimizer_seconds\":\"t\",\"packing_efficiency\":0.7493489583333334,\"padding_ratio\":0.25065104166666663,\"samples_per_s\":\"t\",\"step\":4,\"step_seconds\":\"t\",\"steps\":6,\"tokens_per_s\":\"t\",\"type\":\"step\",\"world_size\":1}",
    "{\"allreduce_seconds\":\"t\",\"backward_seconds\":\"t\",\"data_wait_seconds\":\"t\",\"forward_seconds\":\"t\",\"grad_norm\":0.8978435650694208,\"loss\":1.5922138690948486,\"lr\":0.0013000000000000004,\"optimizer_seconds\":\"t\",\"packing_efficiency\":0.9091796875,\"padding_ratio\":0.0908203125,\"samples_per_s\":\"t\",\"step\":5,\"step_seconds\":\"t\",\"steps\":6,\"tokens_per_s\":\"t\",\"type\":\"step\",\"world_size\":1}",
    "{\"allreduce_seconds\":\"t\",\"backward_seconds\":\"t\",\"data_wait_seconds\":\"t\",\"eval_episodes\":2,\"eval_mean_return\":-0.15553151816129684,\"eval_success_rate\":0.0,\"forward_seconds\":\"t\",\"grad_norm\":1.1536435820380784,\"loss\":1.5002555847167969,\"lr\":0.0004,\"optimizer_seconds\":\"t\",\"packing_efficiency\":0.8779296875,\"padding_ratio\":0.1220703125,\"samples_per_s\":\"t\",\"step\":6,\"step_seconds\":\"t\",\"steps\":6,\"tokens_per_s\":\"t\",\"type\":\"step\",\"world_size\":1}",
    "{\"bytes\":1213283,\"path\":\"step-6.ckpt\",\"step\":6,\"type\":\"checkpoint\"}",
    "{\"action_mse\":1.8010647171688334,\"euler_steps\":4,\"fp8\":{\"action_mse\":1.8009264395710678,\"amax\":0.08957467973232269,\"elements\":36864,\"nan\":0,\"relative_l2\":0.000540714554160199,\"saturated\":0,\"scale_max\":0.00019994347530882806,\"scale_min\":9.023904567584395e-05,\"underflowed\":0,\"weight_bytes_ratio\":3.9947984395318596},\"samples\":4,\"step\":6,\"type\":\"eval\",\"zero_action_mse\":0.8403369731011839}",
};

// The FNV-1a trailers of step-3.ckpt (read before the run prunes it) and step-6.ckpt, and the
// FNV-1a 64 of policy-step-6.fp8.
const uint64_t kCheckpointFnv[] = {0x228361f7b821470eull, 0xa39b0ea0d478d461ull};
const uint64_t kFp8CheckpointFnv = 0xf79953495cacd509ull;
const size_t kFp8CheckpointBytes = 295989;
// clang-format on

bool PrintGolden() { return std::getenv("EMBODY_PRINT_GOLDEN") != nullptr; }

// The event with what varies from run to run replaced by a placeholder: timings, and the
// checkpoint's directory (a temporary one).
std::string Stable(nlohmann::json e) {
  for (const char* k :
       {"step_seconds", "data_wait_seconds", "forward_seconds", "backward_seconds",
        "allreduce_seconds", "optimizer_seconds", "tokens_per_s", "samples_per_s", "mfu"}) {
    if (e.contains(k)) e[k] = "t";
  }
  if (e.contains("path"))
    e["path"] = std::filesystem::path(e["path"].get<std::string>()).filename();
  return e.dump();
}

// On a vector path: the relative tolerance of every floating-point value (see the top).
constexpr double kVectorPathTolerance = 1e-5;

bool OnBaselinePath() { return cpu::ActiveCpuPath() == cpu::CpuPath::kScalar; }

// Relative tolerances of the fields computed from gradients and updated weights (see the top).
double ToleranceOf(const std::string& key) {
  // The FP8 policy's error against the fp32 one is the kernel's own on each path: on a CPU with
  // AVX512_BF16 the avx512 product rounds activations to bf16 (measured: 2.7% off the baseline's).
  if (!OnBaselinePath() && key == "relative_l2") return 0.1;
  if (!OnBaselinePath()) return kVectorPathTolerance;
  if (key == "relative_l2") return 1e-3;  // FP8 rounding of weights that moved in their last bits
  if (key == "grad_norm" || key == "action_mse" || key == "zero_action_mse" || key == "amax" ||
      key == "scale_max" || key == "scale_min" || key == "eval_mean_return") {
    return 1e-6;
  }
  return 0;
}

// `got` against the recorded `want`: the same fields, each equal, or within ToleranceOf(key).
void ExpectEventMatches(const nlohmann::json& got, const nlohmann::json& want,
                        const std::string& where) {
  ASSERT_EQ(got.type(), want.type()) << where;
  if (got.is_object()) {
    std::vector<std::string> got_keys, want_keys;
    for (auto it = got.begin(); it != got.end(); ++it) got_keys.push_back(it.key());
    for (auto it = want.begin(); it != want.end(); ++it) want_keys.push_back(it.key());
    ASSERT_EQ(got_keys, want_keys) << where;
    for (const auto& key : got_keys) {
      const double tol = ToleranceOf(key);
      if (tol > 0 && got[key].is_number() && want[key].is_number() &&
          (got[key].is_number_float() || want[key].is_number_float())) {
        const double g = got[key].get<double>(), w = want[key].get<double>();
        EXPECT_NEAR(g, w, tol * std::max(std::abs(w), 1e-12)) << where << "." << key;
      } else {
        ExpectEventMatches(got[key], want[key], where + "." + key);
      }
    }
    return;
  }
  EXPECT_EQ(got, want) << where;
}

// A step's loss: bit for bit on the baseline path, within kVectorPathTolerance on the others.
void ExpectLoss(float got, float want, size_t step) {
  if (OnBaselinePath()) {
    EXPECT_EQ(got, want) << "step " << step << ": " << got;
  } else {
    EXPECT_NEAR(got, want, kVectorPathTolerance * std::abs(want))
        << "step " << step << " on the " << cpu::ActiveCpuPathName() << " path";
  }
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

common::Result<uint64_t> Trailer(const std::string& path) {
  const std::string bytes = ReadAll(path);
  if (bytes.size() < 8) return common::NotFound(path);
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + bytes.size() - 8, 8);  // little-endian, as written
  return v;
}

// Reads step-3.ckpt's trailer when the step-3 checkpoint event arrives (the run prunes it at 6).
class TrailerAtCheckpoint final : public EventSink {
 public:
  void Post(nlohmann::json event) override {
    if (event["type"] == "checkpoint") {
      auto t = Trailer(event["path"].get<std::string>());
      trailers.push_back(t.ok() ? *t : 0);
    }
    recorded.Post(std::move(event));
  }
  RecordingSink recorded;
  std::vector<uint64_t> trailers;
};

class TrainerGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("embody-trainer-golden-" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(TrainerGoldenTest, ShortRunReproducesTheRecordedLossesEventsAndCheckpoints) {
  LocalCommunicator comm;
  TrailerAtCheckpoint sink;
  auto r = Train(GoldenRun(dir_.string()), comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto events = sink.recorded.events();
  if (PrintGolden()) {
    std::printf("const float kLosses[] = {\n   ");
    for (float l : r->losses) std::printf(" %af,", static_cast<double>(l));
    std::printf("\n};\n\nconst char* const kEvents[] = {\n");
    for (const auto& e : events) {
      std::string s = Stable(e), quoted;
      for (char c : s) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
      std::printf("    \"%s\",\n", quoted.c_str());
    }
    std::printf("};\n\nconst uint64_t kCheckpointFnv[] = {");
    for (uint64_t t : sink.trailers)
      std::printf("0x%016llxull, ", static_cast<unsigned long long>(t));
    std::printf("};\nconst uint64_t kFp8CheckpointFnv = 0x%016llxull;\n",
                static_cast<unsigned long long>(common::Fnv1a64(ReadAll(r->fp8_checkpoint))));
    std::printf("const size_t kFp8CheckpointBytes = %zu;\n", ReadAll(r->fp8_checkpoint).size());
  }
  ASSERT_EQ(r->losses.size(), std::size(kLosses));
  for (size_t i = 0; i < r->losses.size(); ++i) ExpectLoss(r->losses[i], kLosses[i], i + 1);
  ASSERT_EQ(events.size(), std::size(kEvents));
  for (size_t i = 0; i < events.size(); ++i) {
    ExpectEventMatches(nlohmann::json::parse(Stable(events[i])), nlohmann::json::parse(kEvents[i]),
                       "event " + std::to_string(i));
  }
  // The checkpoint bytes hold the weights, so they are pinned bit for bit only where the
  // weights are (Fnv below: on the CPU they were recorded on); everywhere, each file is whole (its
  // trailer is the one the run reported) and the FP8 file has its size.
  ASSERT_EQ(sink.trailers.size(), std::size(kCheckpointFnv));
  EXPECT_EQ(*ListCheckpointSteps(dir_.string()), (std::vector<int64_t>{6}));
  auto last = Trailer(CheckpointPath(dir_.string(), 6));
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, sink.trailers[1]);
  EXPECT_EQ(r->fp8_checkpoint, (dir_ / "policy-step-6.fp8").string());
  // Its tensors' bytes are fixed by the shapes; its JSON header writes floats (statistics of
  // weights within tolerance) in their shortest form, a few characters more or fewer.
  EXPECT_NEAR(static_cast<double>(ReadAll(r->fp8_checkpoint).size()),
              static_cast<double>(kFp8CheckpointBytes), 64.0);
  if (!OnBaselinePath() || sink.trailers[1] != kCheckpointFnv[1]) {
    std::printf("note: checkpoint bytes differ from the recorded CPU's (weights within tolerance)\n");
  } else {
    EXPECT_EQ(sink.trailers, std::vector<uint64_t>(std::begin(kCheckpointFnv),
                                                   std::end(kCheckpointFnv)));
    EXPECT_EQ(common::Fnv1a64(ReadAll(r->fp8_checkpoint)), kFp8CheckpointFnv);
  }
}

// Resumed from step 3 (written by the same run stopped there), the run takes steps 4..6 exactly as
// the straight one did.
TEST_F(TrainerGoldenTest, ResumeFromTheMiddleReproducesTheRecordedLosses) {
  LocalCommunicator comm;
  // Asked to stop after step 2, the run agrees in step 3 and checkpoints it.
  std::atomic<bool> stop{false};
  class StopAt final : public EventSink {
   public:
    explicit StopAt(std::atomic<bool>* s) : s_(s) {}
    void Post(nlohmann::json e) override {
      if (e["type"] == "step" && e["step"] == 2) s_->store(true);
    }
    std::atomic<bool>* s_;
  } stop_at(&stop);
  TrainerOptions stopped = GoldenRun(dir_.string());
  stopped.stop_requested = &stop;
  auto s = Train(stopped, comm, &stop_at);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->stopped);
  ASSERT_EQ(s->last_checkpoint, CheckpointPath(dir_.string(), 3));
  auto trailer = Trailer(s->last_checkpoint);
  ASSERT_TRUE(trailer.ok());
  // The same file a straight run writes at step 3, on this machine.
  {
    const std::filesystem::path straight_dir = dir_.string() + "-straight";
    std::filesystem::remove_all(straight_dir);
    TrailerAtCheckpoint straight_sink;
    auto straight = Train(GoldenRun(straight_dir.string()), comm, &straight_sink);
    std::filesystem::remove_all(straight_dir);
    ASSERT_TRUE(straight.ok()) << straight.status().ToString();
    ASSERT_FALSE(straight_sink.trailers.empty());
    EXPECT_EQ(*trailer, straight_sink.trailers[0]);
  }

  TrainerOptions resumed = GoldenRun(dir_.string());
  resumed.resume_from = s->last_checkpoint;
  RecordingSink sink;
  auto r = Train(resumed, comm, &sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first_step, 3);
  ASSERT_EQ(r->losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) ExpectLoss(r->losses[i], kLosses[3 + i], i + 4);
  // From step 4 on, the resumed run's events are the straight run's.
  const auto events = sink.events();
  const size_t skip = std::size(kEvents) - events.size();
  ASSERT_LE(events.size(), std::size(kEvents));
  for (size_t i = 0; i < events.size(); ++i) {
    ExpectEventMatches(nlohmann::json::parse(Stable(events[i])),
                       nlohmann::json::parse(kEvents[skip + i]), "event " + std::to_string(i));
  }
}

}  // namespace
}  // namespace engine

int main(int argc, char** argv) {
  // Before anything chooses a kernel: the choice is made once per process. The baseline path
  // unless ctest asks for another (and one this CPU lacks is a skip, not a quiet fallback).
  if (const char* forced = std::getenv("EMBODY_CPU_PATH"); forced != nullptr && *forced != '\0') {
    auto path = engine::cpu::ParseCpuPath(forced);
    if (!path || !engine::cpu::CpuSupports(*path)) {
      std::printf("skipped: this CPU cannot run EMBODY_CPU_PATH=%s\n", forced);
      return 77;
    }
  }
  const char* asked = std::getenv("EMBODY_CPU_PATH");
  if (asked == nullptr || *asked == '\0') setenv("EMBODY_CPU_PATH", "scalar", 1);
  setenv("EMBODY_GEMM", "eigen", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
