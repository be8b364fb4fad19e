#include "engine/dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>

namespace engine {

MpiCommunicator::MpiCommunicator() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

void MpiCommunicator::AllreduceMean(float* data, size_t n) {
  if (world_size_ == 1) return;
  // MPI counts are int: reduce very large buffers in pieces.
  constexpr size_t kMaxCount = size_t{1} << 30;
  for (size_t off = 0; off < n; off += kMaxCount) {
    int count = static_cast<int>(std::min(kMaxCount, n - off));
    MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  const float inv = 1.0f / static_cast<float>(world_size_);
  for (size_t i = 0; i < n; ++i) data[i] *= inv;
}

double MpiCommunicator::AllreduceSum(double x) {
  double out = x;
  MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

double MpiCommunicator::AllreduceMax(double x) {
  double out = x;
  MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

}  // namespace engine
