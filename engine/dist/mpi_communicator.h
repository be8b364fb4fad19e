// MpiCommunicator: Communicator over MPI_COMM_WORLD. The caller owns MPI_Init/MPI_Finalize
// (main.cc, or an MPI test's main); construct this only between them.
//
// AllreduceMean is MPI_Allreduce(SUM) in place over the whole flat buffer, then a divide by the
// world size. MPI guarantees every rank receives the same reduced values, so parameters updated
// from them stay bitwise identical. Bucketing and overlap with backward come later (DESIGN §5).
#pragma once

#include "engine/dist/communicator.h"

namespace engine {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void AllreduceMean(float* data, size_t n) override;
  double AllreduceSum(double x) override;
  double AllreduceMax(double x) override;

 private:
  int rank_ = 0;
  int world_size_ = 1;
};

}  // namespace engine
