// dataset_train_bench: the engine's data-wait share of step time when it trains on shards
// (engine.data.dataset "dir:...": DatasetStream plans from index token counts, background
// threads read, verify and decode samples ahead of the loader), side by side in one run with the
// built-in generated stream (sim:reach) on the same reference model and rows. Goal: < 2%.
//
//   dataset_train_bench [--demos 64] [--frames 50] [--image 84] [--steps 10] [--warmup 2]
//                       [--rows 8] [--tokens 512] [--read-threads 2] [--dir /tmp]
//
// The dataset is generated first: a robomimic-layout HDF5 file (engine/testing/reach_hdf5.h:
// one 84×84 RGB camera, eef pos/quat and gripper qpos, 7-D actions) imported through
// storage::ImportHdf5 into default-sized shards (256 MiB, 1 MiB chunks), then trained on with
// the reference model (d_model 256, 4 layers, 8 heads, mlp 1024, horizon 16), the camera resized
// to 32×32 (16 patches). Data-wait share = Σ data_wait_seconds / Σ step_seconds over the timed
// steps, from the trainer's own step events (data wait is the time Next() blocked for a batch).
// Run under mpirun for several ranks. The last line is JSON.
//
// --dataset-dir DIR trains on an existing dataset directory instead (a LeRobot import, say:
// bench/lerobot_bench.sh), every camera of it resized to 32×32, its obs/state as the state token,
// with --action-dim matching its actions; nothing is generated and DIR is left as it is.
// --goal sets the share the JSON's goal_met is judged by (issue 27's is 0.05).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/report/recording_sink.h"
#include "engine/testing/reach_hdf5.h"
#include "engine/train/step_stats.h"
#include "engine/train/trainer.h"

namespace {

struct Args {
  int demos = 64, frames = 50, image = 84, steps = 10, warmup = 2, rows = 8, tokens = 512;
  int read_threads = 2;
  std::string dir = "/tmp";
  std::string dataset_dir;  // an existing dataset; empty: generate one
  int action_dim = 7;       // the dataset's (the generated one's is 7)
  double goal = 0.02;
};

struct Figures {
  double wait = 0, step = 0, tokens_per_s = 0, samples_per_s = 0;
  int steps = 0;
  double share() const { return step > 0 ? wait / step : 0.0; }
};

bool Run(const Args& a, const std::string& dataset, engine::Communicator& comm, Figures* f) {
  engine::TrainerOptions o;
  api::EngineOptions& e = o.engine;
  e.model.d_model = 256;
  e.model.layers = 4;
  e.model.heads = 8;
  e.model.mlp = 1024;
  e.model.action_horizon = 16;
  e.data.rows_per_step = a.rows;
  e.data.tokens_per_row = a.tokens;
  if (!dataset.empty()) {
    e.data.dataset = "dir:" + dataset;
    e.data.language = "reach the red blob";  // for episodes that carry no instruction
    e.model.action_dim = a.action_dim;
  }
  e.optim.steps = a.warmup + a.steps;
  e.optim.warmup_steps = 1;
  e.optim.lr = 1e-3;
  o.print_progress = false;
  o.read_threads = a.read_threads;
  engine::RecordingSink sink;
  auto r = engine::Train(o, comm, &sink);
  if (!r.ok()) {
    std::fprintf(stderr, "dataset_train_bench: %s\n", r.status().ToString().c_str());
    return false;
  }
  double tokens = 0;
  for (const auto& ev : sink.events()) {
    if (ev["type"] != "step") continue;
    auto s = engine::StepStats::FromJson(ev);
    if (!s.ok()) {
      std::fprintf(stderr, "dataset_train_bench: %s\n", s.status().ToString().c_str());
      return false;
    }
    if (s->step <= a.warmup) continue;
    f->wait += s->data_wait_seconds;
    f->step += s->step_seconds;
    tokens += s->tokens_per_s * s->step_seconds;
    f->samples_per_s += s->samples_per_s * s->step_seconds;
    ++f->steps;
  }
  f->tokens_per_s = f->step > 0 ? tokens / f->step : 0;
  f->samples_per_s = f->step > 0 ? f->samples_per_s / f->step : 0;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"data-wait share of the engine's step with the shard reader"};
  app.add_option("--demos", a.demos);
  app.add_option("--frames", a.frames);
  app.add_option("--image", a.image);
  app.add_option("--steps", a.steps);
  app.add_option("--warmup", a.warmup);
  app.add_option("--rows", a.rows);
  app.add_option("--tokens", a.tokens);
  app.add_option("--read-threads", a.read_threads);
  app.add_option("--dir", a.dir);
  app.add_option("--dataset-dir", a.dataset_dir, "train on this dataset directory (kept)");
  app.add_option("--action-dim", a.action_dim, "the dataset's action width (--dataset-dir)");
  app.add_option("--goal", a.goal, "data-wait share goal_met is judged by");
  CLI11_PARSE(app, argc, argv);

  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int code = 0;
  {
    engine::MpiCommunicator comm;
    const bool leader = comm.rank() == 0;
    std::string root, dataset;
    double import_seconds = 0;
    if (leader && !a.dataset_dir.empty()) {
      dataset = std::filesystem::absolute(a.dataset_dir).string();
    } else if (leader) {
      std::string tmpl = a.dir + "/dataset_train_benchXXXXXX";
      if (::mkdtemp(tmpl.data()) != nullptr) root = tmpl;
      engine::testing::ReachHdf5Spec spec;
      spec.demos = a.demos;
      spec.frames = a.frames;
      spec.image_size = a.image;
      const double t0 = common::MonotonicSeconds();
      auto made = root.empty() ? common::Result<std::string>(common::Internal(
                                     "cannot make a directory under " + a.dir))
                               : engine::testing::MakeReachDataset(root, spec, 256 << 10, 1 << 20);
      import_seconds = common::MonotonicSeconds() - t0;
      if (made.ok()) {
        dataset = *made;
      } else {
        std::fprintf(stderr, "dataset_train_bench: %s\n", made.status().ToString().c_str());
      }
    }
    comm.BroadcastBytes(&dataset, 0);
    if (dataset.empty()) code = 1;
    Figures shards, generated;
    if (code == 0 && !Run(a, dataset, comm, &shards)) code = 1;
    if (code == 0 && !Run(a, "", comm, &generated)) code = 1;
    if (code == 0 && leader) {
      if (a.dataset_dir.empty()) {
        std::printf(
            "dataset_train_bench: %d rank(s); %d demos x %d frames, %dx%d camera (write + import "
            "%.1f s); reference model, %d rows x %d tokens, %d timed steps, %d read threads\n",
            comm.world_size(), a.demos, a.frames, a.image, a.image, import_seconds, a.rows,
            a.tokens, a.steps, a.read_threads);
      } else {
        std::printf(
            "dataset_train_bench: %d rank(s); dataset %s, %d-dim actions; reference model, %d "
            "rows x %d tokens, %d timed steps, %d read threads\n",
            comm.world_size(), dataset.c_str(), a.action_dim, a.rows, a.tokens, a.steps,
            a.read_threads);
      }
      auto print = [](const char* name, const Figures& f) {
        std::printf(
            "%-10s data wait %7.2f ms/step of %7.1f ms/step = %5.2f%%  real tokens/s %8.0f  "
            "samples/s %6.1f\n",
            name, 1e3 * f.wait / f.steps, 1e3 * f.step / f.steps, 100 * f.share(), f.tokens_per_s,
            f.samples_per_s);
      };
      print("shards", shards);
      print("generated", generated);
      std::printf("step time shards / generated: %.3f\n", shards.step / generated.step);
      nlohmann::json j = {{"bench", "dataset_train_bench"},
                          {"world_size", comm.world_size()},
                          {"dataset", a.dataset_dir.empty() ? "generated hdf5" : dataset},
                          {"action_dim", a.dataset_dir.empty() ? 7 : a.action_dim},
                          {"read_threads", a.read_threads},
                          {"shards_data_wait_share", shards.share()},
                          {"generated_data_wait_share", generated.share()},
                          {"shards_step_seconds", shards.step / shards.steps},
                          {"generated_step_seconds", generated.step / generated.steps},
                          {"step_time_ratio", shards.step / generated.step},
                          {"goal", a.goal},
                          {"goal_met", shards.share() < a.goal}};
      if (a.dataset_dir.empty()) {
        j["demos"] = a.demos;
        j["frames"] = a.frames;
      }
      std::printf("%s\n", j.dump().c_str());
    }
    if (leader && !root.empty()) std::filesystem::remove_all(root);  // never --dataset-dir
  }
  MPI_Finalize();
  return code;
}
