// Closed-loop success rates (docs/eval.md): behaviour cloning on each built-in task's expert
// demonstrations, evaluated in the simulator against the same model untrained, and the cloned
// policy again through FP8 post-training quantisation. Side by side in one run, same episodes
// (seed), same model shape; prints a table and one JSON line.
//
//   closed_loop_bench [--steps 600] [--episodes 64] [--tasks reach,push,pick_place]
//                     [--demo-noise 0.2[,1.0...]]
//
// --demo-noise lists values of engine.data.demo_noise for push and pick_place: each is trained
// and evaluated once per value, side by side (JSON keys "push@1.0" when more than one is given).
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/format/checkpoint.h"
#include "engine/format/checkpoint_model.h"
#include "engine/dist/communicator.h"
#include "engine/eval/episodes.h"
#include "engine/eval/eval_policy.h"
#include "engine/model/policy_options.h"
#include "engine/testing/small_run.h"

namespace {

std::string CheckpointBytes(const engine::TrainerOptions& o, const std::vector<float>& params) {
  api::JobSpec spec;
  spec.engine = o.engine;
  engine::CheckpointData d;
  d.step = o.engine.optim.steps;
  d.config = {{"engine", api::ToJson(spec)["engine"]},
              {"model", engine::ModelJson(engine::PolicyConfigFromOptions(o.engine).value(),
                                          params.size())}};
  d.params = params;
  d.adam_m.assign(params.size(), 0.0f);
  d.adam_v.assign(params.size(), 0.0f);
  return engine::EncodeCheckpoint(d);
}

engine::eval::TaskEvalResult Evaluate(const std::string& bytes, bool fp8, const std::string& task,
                                      int episodes) {
  auto p = engine::eval::LoadEvalPolicy(bytes, fp8);
  if (!p.ok()) {
    std::fprintf(stderr, "load: %s\n", p.status().ToString().c_str());
    std::exit(1);
  }
  auto r = engine::eval::EvaluateTask(*p->actor, engine::eval::EnvFor(*p, task), episodes, 9);
  if (!r.ok()) {
    std::fprintf(stderr, "eval: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return *r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("closed-loop success rates: BC vs untrained vs BC through FP8");
  int steps = 600, episodes = 64;
  std::string tasks_arg = "reach,push,pick_place";
  app.add_option("--steps", steps, "BC steps per task")->check(CLI::Range(1, 100000));
  app.add_option("--episodes", episodes, "episodes per evaluation")->check(CLI::Range(1, 1000));
  app.add_option("--tasks", tasks_arg, "comma-separated tasks");
  std::vector<double> noises = {api::kDefaultDemoNoise};
  app.add_option("--demo-noise", noises, "largest perturbations of the push and pick_place "
                 "demonstrations (engine.data.demo_noise), comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> tasks;
  std::stringstream ss(tasks_arg);
  for (std::string t; std::getline(ss, t, ',');) tasks.push_back(t);

  nlohmann::json line = {{"bench", "closed_loop"},
                         {"steps", steps},
                         {"episodes", episodes},
                         {"demo_noise", noises}};
  std::printf("%-11s %8s %6s %10s %10s %10s %12s %12s %8s\n", "task", "steps", "noise",
              "untrained", "bc", "bc_fp8", "ret_untr", "ret_bc", "train_s");
  // (task, demo_noise) runs: reach's stream has no demonstration noise, so it runs once.
  std::vector<std::pair<std::string, double>> runs;
  for (const std::string& task : tasks) {
    for (double noise : noises) {
      runs.emplace_back(task, noise);
      if (task == "reach") break;
    }
  }
  for (const auto& [task, demo_noise] : runs) {
    engine::TrainerOptions o = engine::testing::SmallRun(steps, 3);
    o.engine.optim.warmup_steps = std::min(10, steps);
    o.engine.data.dataset = "sim:" + task;
    if (task != "reach") {
      o.engine.model.action_dim = 4;  // (dx, dy, dz, grip)
      o.engine.data.demo_noise = demo_noise;
    }
    engine::LocalCommunicator comm;
    const auto t0 = std::chrono::steady_clock::now();
    auto trained = engine::Train(o, comm, nullptr);
    const double train_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!trained.ok()) {
      std::fprintf(stderr, "train %s: %s\n", task.c_str(), trained.status().ToString().c_str());
      return 1;
    }
    auto model = engine::PolicyTransformer::Create(
                     engine::PolicyConfigFromOptions(o.engine).value())
                     .value();
    model->Init(o.engine.seed);
    const std::vector<float> init(model->params(), model->params() + model->num_params());
    const std::string bc = CheckpointBytes(o, trained->params);
    const auto u = Evaluate(CheckpointBytes(o, init), false, task, episodes);
    const auto b = Evaluate(bc, false, task, episodes);
    const auto q = Evaluate(bc, true, task, episodes);
    std::printf("%-11s %8d %6.2f %10.3f %10.3f %10.3f %12.3f %12.3f %8.1f\n", task.c_str(),
                steps, task == "reach" ? 0.0 : demo_noise, u.success_rate, b.success_rate,
                q.success_rate, u.mean_return, b.mean_return, train_s);
    std::fflush(stdout);
    char key[64];
    std::snprintf(key, sizeof key, "%s@%g", task.c_str(), demo_noise);
    line[task == "reach" || noises.size() == 1 ? task : std::string(key)] = {{"untrained", u.success_rate}, {"bc", b.success_rate},
                  {"bc_fp8", q.success_rate},    {"return_untrained", u.mean_return},
                  {"return_bc", b.mean_return},  {"train_seconds", train_s}};
  }
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
