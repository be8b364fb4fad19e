// FP8 gradient all-reduce vs fp32, under MPI: mpirun -np 2 fp8_allreduce_bench [flags].
//
// 1. Exchange: the reference model's gradient (d_model 256, 4 layers, 8 heads, MLP 1024, horizon
//    16: its parameter count, in 2 MiB buckets as the trainer cuts them) summed over the ranks
//    by GradBuckets three ways, interleaved rep by rep: fp32 MPI_Iallreduce, fp8 E4M3 and fp8
//    E5M2 (engine/dist/fp8_allreduce.h). The gradient is synthetic: normal values whose scale
//    changes every 4,096 entries over four decades, as per-layer gradients do. Reports the
//    median exchange time, the bytes this rank sent as each path counts them, and the relative
//    L2 error of each fp8 sum against the fp32 one (first step: no residual yet).
// 2. Training: the reference model trained --train-steps steps with engine.fp8.allreduce off
//    and on, same seed and data; the loss at the end both ways (mean of the last 10 steps), and
//    the wire bytes per step. Skipped with --train-steps 0.
// Ends with one JSON line.
#include <mpi.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/dist/fp8_allreduce.h"
#include "engine/dist/grad_buckets.h"
#include "engine/dist/mpi_communicator.h"
#include "engine/model/policy_options.h"
#include "engine/model/policy_transformer.h"
#include "engine/train/trainer.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

api::EngineOptions ReferenceModel(int rows, int steps) {
  api::EngineOptions e;
  e.model.d_model = 256;
  e.model.layers = 4;
  e.model.heads = 8;
  e.model.mlp = 1024;
  e.model.action_horizon = 16;
  e.data.rows_per_step = rows;
  e.optim.steps = steps;
  e.optim.warmup_steps = std::max(1, steps / 10);
  e.seed = 11;
  return e;
}

double MeanOfLast(const std::vector<float>& v, size_t k) {
  k = std::min(k, v.size());
  double s = 0.0;
  for (size_t i = v.size() - k; i < v.size(); ++i) s += v[i];
  return k > 0 ? s / static_cast<double>(k) : 0.0;
}

struct PathResult {
  const char* name;
  double ms = 0.0;
  uint64_t bytes = 0, fp32_bytes = 0;
  double rel_l2 = 0.0;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  CLI::App app{"fp8 vs fp32 gradient all-reduce (run under mpirun -np 2)"};
  int reps = 20, train_steps = 60, rows = 2;
  app.add_option("--reps", reps, "timed exchanges per path")->check(CLI::Range(1, 1000));
  app.add_option("--train-steps", train_steps, "training steps each way (0: skip)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--rows", rows, "packed rows of 512 tokens per rank per training step")
      ->check(CLI::Range(1, 64));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }
  {
    engine::MpiCommunicator comm;
    const api::EngineOptions ref = ReferenceModel(rows, train_steps);
    auto model = engine::PolicyTransformer::Create(engine::PolicyConfigFromOptions(ref).value());
    const size_t n = model.value()->num_params();
    model.value().reset();

    std::mt19937 rng(1234u + static_cast<unsigned>(comm.rank()));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> local(n);
    for (size_t i = 0; i < n; ++i) {
      local[i] = normal(rng) * std::pow(10.0f, -static_cast<float>((i / 4096) % 4) - 2.0f);
    }
    std::vector<float> fp32(n), e4m3(n), e5m2(n);
    engine::Fp8Allreduce ar4(comm, n, {engine::fp8::Format::kE4M3, true});
    engine::Fp8Allreduce ar5(comm, n, {engine::fp8::Format::kE5M2, true});
    engine::GradBuckets b32(comm, fp32.data(), n, {});
    engine::GradBuckets b4(comm, e4m3.data(), n, {size_t{2} << 20, &ar4});
    engine::GradBuckets b5(comm, e5m2.data(), n, {size_t{2} << 20, &ar5});
    PathResult paths[3] = {{"fp32"}, {"fp8 e4m3"}, {"fp8 e5m2"}};
    std::vector<double> times[3];
    std::vector<float> first[3];
    engine::GradBuckets* buckets[3] = {&b32, &b4, &b5};
    std::vector<float>* bufs[3] = {&fp32, &e4m3, &e5m2};
    for (int rep = 0; rep < reps + 1; ++rep) {  // rep 0 warms up (and is the error's step)
      for (int p = 0; p < 3; ++p) {
        std::copy(local.begin(), local.end(), bufs[p]->begin());
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        buckets[p]->Begin(1.0, 1.0);
        const engine::GlobalStepTotals t = buckets[p]->Finish();
        const double dt = MPI_Wtime() - t0;
        if (rep == 0) {
          first[p] = *bufs[p];
          paths[p].bytes = t.wire_bytes;
          paths[p].fp32_bytes = t.wire_bytes_fp32;
        } else {
          times[p].push_back(dt);
        }
      }
    }
    for (int p = 0; p < 3; ++p) {
      paths[p].ms = Median(times[p]) * 1e3;
      double d = 0.0, norm = 0.0;
      for (size_t i = 0; i < n; ++i) {
        d += (static_cast<double>(first[p][i]) - first[0][i]) * (first[p][i] - first[0][i]);
        norm += static_cast<double>(first[0][i]) * first[0][i];
      }
      paths[p].rel_l2 = std::sqrt(d / norm);
    }

    // Training both ways.
    double loss32 = 0.0, loss8 = 0.0, first_loss = 0.0, train_ms32 = 0.0, train_ms8 = 0.0;
    if (train_steps > 0) {
      engine::TrainerOptions o;
      o.engine = ref;
      o.print_progress = false;
      auto r32 = engine::Train(o, comm, nullptr);
      o.engine.fp8.allreduce = true;
      auto r8 = engine::Train(o, comm, nullptr);
      if (!r32.ok() || !r8.ok()) {
        std::fprintf(stderr, "training failed: %s\n",
                     (!r32.ok() ? r32.status() : r8.status()).ToString().c_str());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      loss32 = MeanOfLast(r32->losses, 10);
      loss8 = MeanOfLast(r8->losses, 10);
      first_loss = r32->losses.front();
      train_ms32 = r32->mean_step_seconds * 1e3;
      train_ms8 = r8->mean_step_seconds * 1e3;
    }

    if (comm.rank() == 0) {
      double load = -1;
      if (FILE* fl = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(fl, "%lf", &load) != 1) load = -1;
        std::fclose(fl);
      }
      std::printf(
          "fp8_allreduce_bench: %d ranks, reference model gradient %zu floats (%.2f MiB) in %zu "
          "buckets, %d reps, load %.2f\n",
          comm.world_size(), n, n * 4.0 / (1 << 20), b32.num_buckets(), reps, load);
      for (const PathResult& p : paths) {
        std::printf(
            "  %-9s exchange %8.3f ms  sent %9llu bytes (%.3fx fp32)  %.2fx fp32 time  rel L2 "
            "vs fp32 sum %.2e\n",
            p.name, p.ms, static_cast<unsigned long long>(p.bytes),
            static_cast<double>(p.bytes) / static_cast<double>(paths[0].bytes), p.ms / paths[0].ms,
            p.rel_l2);
      }
      if (train_steps > 0) {
        std::printf(
            "  training %d steps, %d rows x 512 tokens per rank: loss %.4f -> fp32 %.5f, fp8 "
            "all-reduce %.5f (%+.2f%%); %.0f vs %.0f ms per step\n",
            train_steps, rows, first_loss, loss32, loss8, 100.0 * (loss8 / loss32 - 1.0),
            train_ms32, train_ms8);
      }
      std::printf(
          "{\"bench\":\"fp8_allreduce\",\"ranks\":%d,\"grad_floats\":%zu,\"fp32_ms\":%.3f,"
          "\"e4m3_ms\":%.3f,\"e5m2_ms\":%.3f,\"fp32_bytes\":%llu,\"e4m3_bytes\":%llu,"
          "\"bytes_ratio\":%.4f,\"e4m3_rel_l2\":%.3e,\"e5m2_rel_l2\":%.3e,\"train_steps\":%d,"
          "\"loss_fp32\":%.5f,\"loss_fp8\":%.5f,\"loadavg\":%.2f}\n",
          comm.world_size(), n, paths[0].ms, paths[1].ms, paths[2].ms,
          static_cast<unsigned long long>(paths[0].bytes),
          static_cast<unsigned long long>(paths[1].bytes),
          static_cast<double>(paths[1].bytes) / static_cast<double>(paths[0].bytes),
          paths[1].rel_l2, paths[2].rel_l2, train_steps, loss32, loss8, load);
    }
  }
  MPI_Finalize();
  return 0;
}
