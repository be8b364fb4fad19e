// Communicator: the collective operations the trainer needs for data parallelism, behind one
// small interface so the trainer runs (and is tested) in one process without MPI.
//
// Every rank must call the collectives in the same order with the same sizes. Implementations:
// LocalCommunicator (world size 1, no-ops) here, MpiCommunicator in engine/dist/mpi_communicator.h.
#pragma once

#include <cstddef>

namespace engine {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // data (n) := (sum over ranks of data) / world_size, in place. Every rank gets bitwise the same
  // result, which is what keeps replicated parameters identical.
  virtual void AllreduceMean(float* data, size_t n) = 0;
  // Sum of x over ranks, on every rank.
  virtual double AllreduceSum(double x) = 0;
  // Max of x over ranks, on every rank.
  virtual double AllreduceMax(double x) = 0;
};

// A world of one: collectives return their input.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void AllreduceMean(float*, size_t) override {}
  double AllreduceSum(double x) override { return x; }
  double AllreduceMax(double x) override { return x; }
};

}  // namespace engine
