// Gradient all-reduce overlap benchmark, under MPI: mpirun -np 2 grad_overlap_bench [flags].
//
// A stand-in backward over L layers (each: two float32 GEMMs of the MLP's shape, then its slice
// of a flat gradient buffer of --params-mb MiB "finished") runs three ways, interleaved step by
// step, same work:
//   compute_only  backward alone: the floor;
//   blocking      backward, then one MPI_Allreduce of the whole buffer (the old trainer);
//   bucketed      GradBuckets: each layer marks its slice ready, buckets of --bucket-kb start
//                 MPI_Iallreduce at once, and MPI progress is driven between the GEMMs.
// Reports median step times, the communication time each leaves exposed (step − compute_only)
// and the ratio, then one JSON line. On a machine where compute already occupies every core the
// overlap is limited: Open MPI's shared-memory all-reduce needs CPU too.
//
//   grad_overlap_bench [--params-mb 12] [--layers 8] [--bucket-kb 2048] [--tokens 1024]
//                      [--steps 10]
#include <mpi.h>

#include <Eigen/Core>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/dist/grad_buckets.h"
#include "engine/dist/mpi_communicator.h"

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Flags {
  double params_mb = 12;
  int layers = 8;
  int bucket_kb = 2048;
  int tokens = 1024;
  int steps = 10;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (flag == "--params-mb")
      f.params_mb = v;
    else if (flag == "--layers")
      f.layers = static_cast<int>(v);
    else if (flag == "--bucket-kb")
      f.bucket_kb = static_cast<int>(v);
    else if (flag == "--tokens")
      f.tokens = static_cast<int>(v);
    else if (flag == "--steps")
      f.steps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  Eigen::setNbThreads(1);
  {
    engine::MpiCommunicator comm;
    const size_t n = static_cast<size_t>(f.params_mb * (1 << 20) / sizeof(float));
    std::vector<float> grads(n);
    std::vector<size_t> bounds(f.layers + 1);
    for (int l = 0; l <= f.layers; ++l) bounds[l] = n * l / f.layers;
    RowMatrix x = RowMatrix::Random(f.tokens, 256), w = RowMatrix::Random(1024, 256);
    RowMatrix dy = RowMatrix::Random(f.tokens, 1024), dx(f.tokens, 256), dw(1024, 256);
    engine::GradBuckets buckets(comm, grads.data(), n,
                                engine::GradBucketOptions{static_cast<size_t>(f.bucket_kb) << 10});

    // One layer's backward: dX = dY·W, then dW = dYᵀ·X; `between` runs between the two GEMMs.
    auto layer = [&](int l, auto between) {
      dx.noalias() = dy * w;
      between();
      dw.noalias() = dy.transpose() * x;
      std::fill(grads.begin() + bounds[l], grads.begin() + bounds[l + 1], 1e-3f * (l + 1));
    };
    std::vector<double> t_compute, t_blocking, t_bucketed;
    std::vector<double> overlapped;
    for (int s = 0; s < f.steps + 1; ++s) {  // step 0 is warm-up
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int l = f.layers - 1; l >= 0; --l) layer(l, [] {});
      const double compute = MPI_Wtime() - t0;

      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      for (int l = f.layers - 1; l >= 0; --l) layer(l, [] {});
      comm.AllreduceMean(grads.data(), n);
      const double blocking = MPI_Wtime() - t0;

      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      buckets.Begin(1000.0, 1.0);
      for (int l = f.layers - 1; l >= 0; --l) {
        layer(l, [&] { buckets.Poll(); });
        buckets.MarkReady(bounds[l], bounds[l + 1]);
      }
      buckets.Finish();
      const double bucketed = MPI_Wtime() - t0;
      if (s > 0) {
        t_compute.push_back(compute);
        t_blocking.push_back(blocking);
        t_bucketed.push_back(bucketed);
        overlapped.push_back(static_cast<double>(buckets.completed_before_finish()));
      }
    }
    const double c = Median(t_compute), b = Median(t_blocking), k = Median(t_bucketed);
    if (comm.rank() == 0) {
      double load[3] = {0, 0, 0};
      if (FILE* fl = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(fl, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        std::fclose(fl);
      }
      std::printf(
          "grad_overlap_bench: %d ranks, %.1f MiB of gradients in %d layers, %zu buckets of %d "
          "KiB, %d tokens per layer GEMM, MPI thread level %d, load %.2f\n",
          comm.world_size(), f.params_mb, f.layers, buckets.num_buckets(), f.bucket_kb, f.tokens,
          provided, load[0]);
      std::printf("  compute_only %8.2f ms\n", c * 1e3);
      std::printf("  blocking     %8.2f ms  (exposed communication %.2f ms)\n", b * 1e3,
                  (b - c) * 1e3);
      std::printf(
          "  bucketed     %8.2f ms  (exposed communication %.2f ms; %.0f of %zu buckets "
          "done before Finish)\n",
          k * 1e3, (k - c) * 1e3, Median(overlapped), buckets.num_buckets());
      std::printf("  step time blocking / bucketed: %.2fx\n", b / k);
      std::printf(
          "{\"bench\":\"grad_overlap\",\"ranks\":%d,\"params_mb\":%.2f,\"layers\":%d,"
          "\"bucket_kb\":%d,\"buckets\":%zu,\"compute_ms\":%.3f,\"blocking_ms\":%.3f,"
          "\"bucketed_ms\":%.3f,\"blocking_over_bucketed\":%.3f,\"buckets_done_before_finish\":%."
          "0f,"
          "\"loadavg\":%.2f}\n",
          comm.world_size(), f.params_mb, f.layers, f.bucket_kb, buckets.num_buckets(), c * 1e3,
          b * 1e3, k * 1e3, b / k, Median(overlapped), load[0]);
    }
  }
  MPI_Finalize();
  return 0;
}
