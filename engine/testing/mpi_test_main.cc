// main() of the engine's tests that run under mpirun: MPI at the thread level embody-engine asks
// for (loader threads exist, only the main thread calls MPI), then every test, then MPI_Finalize.
#include <mpi.h>

#include <cstdio>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  if (provided < MPI_THREAD_FUNNELED) {
    std::fprintf(stderr, "MPI provides thread level %d < MPI_THREAD_FUNNELED\n", provided);
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
