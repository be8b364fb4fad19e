// Why a behaviour-cloned table-top policy can lose closed-loop success as training goes on
// (docs/eval.md, "Measured"): one training run of the tests' small model on a sim: task, with a
// checkpoint every --every steps, and for each checkpoint, side by side on the same episodes:
//
//   success      closed-loop success rate with the job's flow sampler (inference_steps 4), with
//                --fine-steps Euler steps, and integrating from x(0) = 0 instead of a noise draw
//                (succ_x0=0, err_x0=0): is it the sampler?
//   err_onpol    mean |policy − expert| over the motion axes (dx, dy, dz; both clamped to the
//                world's [−1, 1]) in the states the policy itself visits, and grip_onpol the
//                share of those states where the gripper sign differs from the expert's
//   err_demo     the same error on held-out demonstration states (the training distribution),
//                observed the way the evaluation observes them (1 camera, 1 frame, 8 language
//                tokens), and err_mixed on the training compositions (1-3 cameras, history)
//
// A model that is accurate on the demonstrations but not on its own states drifts (covariate
// shift); one inaccurate on both is a training matter; one accurate on mixed compositions but
// not on the evaluation's is a train/eval mismatch. `spread` is the first action's standard
// deviation over 8 noise draws in the same state. Prints a table and one JSON line.
//
//   bc_decay_bench [--task push] [--steps 2000] [--every 400] [--episodes 64] [--lr 4e-3]
//                  [--warmup 10] [--fine-steps 16] [--demo-samples 256] [--demo-noise 0.2]
//                  [--trace FILE]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/rng.h"
#include "engine/data/embodied_lengths.h"
#include "engine/dist/communicator.h"
#include "engine/eval/episodes.h"
#include "engine/eval/eval_policy.h"
#include "engine/eval/policy_actor.h"
#include "engine/sim/sim_samples.h"
#include "engine/sim/table_env.h"
#include "engine/testing/small_run.h"

namespace {

// FlowPolicyActor with its starting noise scaled: 0 integrates the flow from x(0) = 0, the centre
// of the noise, and so gives one action per observation instead of a draw.
class ScaledNoiseActor final : public engine::eval::PolicyActor {
 public:
  ScaledNoiseActor(engine::PolicyTransformer& model, int steps, float scale)
      : model_(model), steps_(steps), scale_(scale) {}
  int action_dim() const override { return model_.config().action_dim; }
  common::Status Act(std::span<const engine::PolicySample> obs, uint64_t key,
                     std::vector<float>* actions) override {
    const engine::PolicyConfig& c = model_.config();
    const int n = static_cast<int>(obs.size()), H = c.action_horizon, A = c.action_dim;
    std::vector<int32_t> lengths(n);
    int longest = 1;
    for (int i = 0; i < n; ++i) longest = std::max(longest, lengths[i] = obs[i].NumTokens(H));
    EMBODY_ASSIGN_OR_RETURN(plan, engine::OneSamplePerRow(lengths, longest));
    EMBODY_RETURN_IF_ERROR(engine::BuildPackedBatchInto(obs, plan, H, A, &batch_));
    std::vector<float> noise(static_cast<size_t>(n) * H * A), chunks(noise.size());
    common::Rng rng = common::Rng::ForKey(key, 0x666c6f77ULL);
    for (float& x : noise) x = scale_ * static_cast<float>(rng.Normal());
    EMBODY_RETURN_IF_ERROR(model_.SampleActions(&batch_, noise.data(), steps_, chunks.data()));
    actions->resize(static_cast<size_t>(n) * A);
    for (int i = 0; i < n; ++i) {
      std::copy_n(chunks.data() + static_cast<size_t>(i) * H * A, A,
                  actions->data() + static_cast<size_t>(i) * A);
    }
    return common::Status::Ok();
  }

 private:
  engine::PolicyTransformer& model_;
  int steps_;
  float scale_;
  engine::PackedBatch batch_;
};

struct ActionError {
  double motion = 0.0;  // mean |a − a*| over dx, dy, dz, clamped to [−1, 1]
  double grip = 0.0;    // share of states with the gripper sign wrong
  int64_t states = 0;
  void Add(const float* a, const float* expert, int grip_index) {
    for (int k = 0; k < 3; ++k) {
      motion += std::abs(std::clamp(a[k], -1.0f, 1.0f) - std::clamp(expert[k], -1.0f, 1.0f)) / 3.0;
    }
    grip += (a[grip_index] > 0.0f) != (expert[grip_index] > 0.0f) ? 1.0 : 0.0;
    ++states;
  }
  double Motion() const { return states > 0 ? motion / states : 0.0; }
  double Grip() const { return states > 0 ? grip / states : 0.0; }
};

void Die(const std::string& what, const common::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

// Closed loop: the policy acts, the expert is asked in the same state, the world takes the
// policy's action. Episodes as in engine::eval::EvaluateTask (seed 9, one batch).
ActionError OnPolicyError(engine::eval::PolicyActor& actor, engine::sim::TaskKind kind,
                          int action_dim, int vocab, int episodes, std::FILE* trace = nullptr) {
  engine::sim::TableEnvConfig c;
  c.task = kind;
  c.num_envs = episodes;
  c.action_dim = action_dim;
  c.cameras = 1;
  c.privileged_state = true;
  c.vocab = vocab;
  auto env = engine::sim::TableVecEnv::Create(c);
  if (!env.ok()) Die("env", env.status());
  (*env)->Reset(common::Rng::ForKey(9, 0x6576616cULL, 0).NextU64());
  const int max_steps = engine::sim::SimTasks(kind, 1).max_steps();
  ActionError err;
  std::vector<uint8_t> ended(episodes, 0);
  std::vector<float> actions;
  engine::sim::StepResult step;
  const int grip = action_dim == engine::sim::kActionDim ? 3 : 6;
  for (int t = 0; t < max_steps; ++t) {
    const std::vector<float> expert = (*env)->ExpertActions();
    auto s =
        actor.Act((*env)->observations(), common::Rng::ForKey(9, 0x6f6e, t).NextU64(), &actions);
    if (!s.ok()) Die("act", s);
    for (int e = 0; e < episodes; ++e) {
      if (ended[e]) continue;
      const float* a = &actions[static_cast<size_t>(e) * action_dim];
      const float* x = &expert[static_cast<size_t>(e) * action_dim];
      err.Add(a, x, grip);
      if (trace != nullptr) {
        // Episode, step, the state token (proprioception and object state), policy, expert.
        const std::vector<float>& st = (*env)->observations()[e].states;
        std::fprintf(trace, "%d %d", e, t);
        for (int k = 0; k < 15; ++k) std::fprintf(trace, " %.4f", st[k]);
        for (int k = 0; k < 4; ++k) std::fprintf(trace, " %.4f", a[k]);
        for (int k = 0; k < 4; ++k) std::fprintf(trace, " %.4f", x[k]);
        std::fprintf(trace, "\n");
      }
    }
    s = (*env)->Step(actions, &step);
    if (!s.ok()) Die("step", s);
    for (int e = 0; e < episodes; ++e) ended[e] |= step.done[e];
  }
  return err;
}

// Held-out demonstration states (indices far past any training run's), observed with `comp`
// (or the training distribution's compositions when mixed).
ActionError DemoError(engine::eval::PolicyActor& actor, const engine::sim::SimDemoSource& demos,
                      int action_dim, int vocab, int samples, bool mixed,
                      double* spread = nullptr) {
  engine::data::EmbodiedLengthConfig lc;
  engine::data::EmbodiedLengthSampler sampler(77, lc);
  std::vector<engine::PolicySample> obs(samples);
  std::vector<float> labels(static_cast<size_t>(samples) * action_dim);
  for (int i = 0; i < samples; ++i) {
    engine::data::SampleComposition comp;
    if (mixed) {
      comp = sampler.Next();
    } else {
      comp.language_tokens = 8;
      comp.cameras = 1;
      comp.frames = 1;
    }
    demos.MakeSample(uint64_t{1} << 40 | static_cast<uint64_t>(i), 1000 + i, comp, vocab, &obs[i]);
    std::copy_n(obs[i].actions.data(), action_dim, &labels[static_cast<size_t>(i) * action_dim]);
    obs[i].actions.clear();
    obs[i].noise.clear();
  }
  ActionError err;
  std::vector<float> actions;
  const int grip = action_dim == engine::sim::kActionDim ? 3 : 6;
  if (spread != nullptr) {
    // The spread of the first action over 8 noise draws in the same state (motion axes, clamped).
    double sum = 0.0;
    for (int i = 0; i < samples; ++i) {
      double m[3] = {0, 0, 0}, m2[3] = {0, 0, 0};
      for (int d = 0; d < 8; ++d) {
        auto s =
            actor.Act(std::span<const engine::PolicySample>(&obs[i], 1), 900 + 8 * i + d, &actions);
        if (!s.ok()) Die("act", s);
        for (int k = 0; k < 3; ++k) {
          const double x = std::clamp(actions[k], -1.0f, 1.0f);
          m[k] += x / 8, m2[k] += x * x / 8;
        }
      }
      for (int k = 0; k < 3; ++k) sum += std::sqrt(std::max(0.0, m2[k] - m[k] * m[k])) / 3;
    }
    *spread = sum / samples;
  }
  // One sample at a time: compositions differ in length, and one per row keeps it simple.
  for (int i = 0; i < samples; ++i) {
    auto s = actor.Act(std::span<const engine::PolicySample>(&obs[i], 1), 5 + i, &actions);
    if (!s.ok()) Die("act", s);
    err.Add(actions.data(), &labels[static_cast<size_t>(i) * action_dim], grip);
  }
  return err;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("closed-loop success and action errors over one behaviour-cloning run");
  std::string task = "push";
  int steps = 2000, every = 400, episodes = 64, warmup = 10, fine_steps = 16, demo_samples = 256;
  double lr = 4e-3;
  app.add_option("--task", task, "push or pick_place");
  app.add_option("--steps", steps, "training steps (the schedule's horizon)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--every", every, "checkpoint and evaluate every N steps")
      ->check(CLI::Range(1, 100000));
  app.add_option("--episodes", episodes, "episodes per evaluation")->check(CLI::Range(1, 256));
  app.add_option("--lr", lr, "peak learning rate");
  app.add_option("--warmup", warmup, "warm-up steps");
  app.add_option("--fine-steps", fine_steps, "Euler steps of the second sampler");
  app.add_option("--demo-samples", demo_samples, "held-out demonstration states");
  double demo_noise = api::kDefaultDemoNoise;
  app.add_option("--demo-noise", demo_noise, "engine.data.demo_noise of the training run")
      ->check(CLI::Range(0.0, 1.0));
  std::string trace_path;
  app.add_option("--trace", trace_path,
                 "write the last checkpoint's closed-loop states and actions here (one line a "
                 "step: episode, step, 15 state values, policy action, expert action)");
  CLI11_PARSE(app, argc, argv);
  auto kind = engine::sim::ParseTaskKind(task);
  if (!kind.ok() || *kind == engine::sim::TaskKind::kReach) {
    std::fprintf(stderr, "--task: push or pick_place\n");
    return 1;
  }

  engine::TrainerOptions o = engine::testing::SmallRun(steps, 3);
  o.engine.optim.warmup_steps = std::min(warmup, steps);
  o.engine.optim.lr = lr;
  o.engine.data.dataset = "sim:" + task;
  o.engine.model.action_dim = 4;
  o.engine.data.demo_noise = demo_noise;
  o.engine.checkpoint.every_steps = every;
  o.engine.checkpoint.keep = 1000;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("bc_decay_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  o.checkpoint_dir = dir.string();
  engine::LocalCommunicator comm;
  const auto t0 = std::chrono::steady_clock::now();
  auto trained = engine::Train(o, comm, nullptr);
  const double train_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!trained.ok()) Die("train", trained.status());
  auto demos = engine::sim::SimDemoSource::Create(*kind, 4, o.engine.model.action_horizon, 12345,
                                                  512, demo_noise);
  if (!demos.ok()) Die("demos", demos.status());

  nlohmann::json line = {{"bench", "bc_decay"},      {"task", task},
                         {"steps", steps},           {"lr", lr},
                         {"episodes", episodes},     {"train_seconds", train_s},
                         {"fine_steps", fine_steps}, {"demo_noise", demo_noise}};
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-6s %8s %8s %9s %9s %9s %9s %9s %9s %9s %9s\n", "step", "loss", "success",
              "succ_fine", "succ_x0=0", "err_onpol", "err_demo", "err_mixed", "err_x0=0", "spread",
              "grip_demo");
  for (int at = every; at <= steps; at += every) {
    auto bytes = common::ReadFile((dir / ("step-" + std::to_string(at) + ".ckpt")).string());
    if (!bytes.ok()) Die("read checkpoint", bytes.status());
    auto p = engine::eval::LoadEvalPolicy(*bytes, false);
    if (!p.ok()) Die("load", p.status());
    const int vocab = 512;
    engine::eval::FlowPolicyActor coarse(*p->flow, p->engine.model.inference_steps);
    engine::eval::FlowPolicyActor fine(*p->flow, fine_steps);
    const auto env = engine::eval::EnvFor(*p, task);
    ScaledNoiseActor centre(*p->flow, p->engine.model.inference_steps, 0.0f);
    auto s4 = engine::eval::EvaluateTask(coarse, env, episodes, 9);
    auto sf = engine::eval::EvaluateTask(fine, env, episodes, 9);
    auto s0 = engine::eval::EvaluateTask(centre, env, episodes, 9);
    if (!s4.ok()) Die("eval", s4.status());
    if (!sf.ok()) Die("eval", sf.status());
    if (!s0.ok()) Die("eval", s0.status());
    std::FILE* trace = nullptr;
    if (!trace_path.empty() && at + every > steps) trace = std::fopen(trace_path.c_str(), "w");
    const ActionError on = OnPolicyError(coarse, *kind, 4, vocab, episodes, trace);
    if (trace != nullptr) std::fclose(trace);
    double spread = 0.0;
    const ActionError demo = DemoError(coarse, **demos, 4, vocab, demo_samples, false, &spread);
    const ActionError demo0 = DemoError(centre, **demos, 4, vocab, demo_samples, false);
    const ActionError mixed = DemoError(coarse, **demos, 4, vocab, demo_samples, true);
    // The loss around this step (mean of the 20 steps up to it), noisy per step.
    double loss = 0.0;
    int n = 0;
    for (int k = std::max(0, at - 20); k < at; ++k, ++n) loss += trained->losses[k];
    loss /= std::max(1, n);
    std::printf("%-6d %8.4f %8.3f %9.3f %9.3f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f\n", at, loss,
                s4->success_rate, sf->success_rate, s0->success_rate, on.Motion(), demo.Motion(),
                mixed.Motion(), demo0.Motion(), spread, demo.Grip());
    std::fflush(stdout);
    rows.push_back({{"step", at},
                    {"loss", loss},
                    {"success", s4->success_rate},
                    {"success_fine", sf->success_rate},
                    {"success_zero_noise", s0->success_rate},
                    {"err_demo_zero_noise", demo0.Motion()},
                    {"spread_demo", spread},
                    {"err_onpolicy", on.Motion()},
                    {"grip_onpolicy", on.Grip()},
                    {"err_demo", demo.Motion()},
                    {"err_mixed", mixed.Motion()},
                    {"grip_demo", demo.Grip()}});
  }
  std::filesystem::remove_all(dir);
  line["checkpoints"] = rows;
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
