// allreduce_probe: the time of one MPI_Allreduce (float sum) against message size on the ranks it
// runs on, for the planner's alpha-beta fit (bench/planner_calibrate.sh). Sizes 4 KiB to 16 MiB;
// for each, the median over 5 repetitions of the mean of enough calls to take about 50 ms.
//
//   mpirun -np 2 allreduce_probe        last line: {"ranks": p, "bytes": [...], "seconds": [...]}
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<double> bytes_list, seconds_list;
  for (size_t bytes = 4096; bytes <= (size_t{16} << 20); bytes *= 4) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> in(n, 1.0f), out(n);
    // Calls per repetition: rank 0 times one call and everyone agrees on the count.
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double one = MPI_Wtime() - t0;
    MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const int calls = std::clamp(static_cast<int>(0.05 / std::max(one, 1e-7)), 3, 20000);
    std::vector<double> reps;
    for (int r = 0; r < 5; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      for (int c = 0; c < calls; ++c) {
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      }
      double t = (MPI_Wtime() - t0) / calls;
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      reps.push_back(t);
    }
    std::sort(reps.begin(), reps.end());
    bytes_list.push_back(static_cast<double>(bytes));
    seconds_list.push_back(reps[reps.size() / 2]);
    if (rank == 0) {
      std::printf("%9zu bytes  %10.1f us  %7.2f GB/s algorithm bandwidth\n", bytes,
                  reps[2] * 1e6, bytes / reps[2] / 1e9);
    }
  }
  if (rank == 0) {
    nlohmann::json j = {{"bench", "allreduce_probe"}, {"ranks", size}, {"bytes", bytes_list},
                        {"seconds", seconds_list}};
    std::printf("%s\n", j.dump().c_str());
  }
  MPI_Finalize();
  return 0;
}
