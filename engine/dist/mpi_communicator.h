// MpiCommunicator: Communicator over MPI_COMM_WORLD (or a Split of it). The caller owns
// MPI_Init(_thread) and MPI_Finalize (main.cc, or an MPI test's main); construct this only between
// them, and call it from one thread (the engine asks for MPI_THREAD_FUNNELED: its data loader
// threads never call MPI).
//
// AllreduceMean is MPI_Allreduce(SUM) in place over the whole flat buffer, then a divide by the
// world size. The nonblocking collectives are MPI_Iallreduce; their requests live in a slot table
// indexed by CollectiveId; so are the byte exchanges (MPI_Ialltoall, MPI_Iallgather), which run
// on their own duplicates of MPI_COMM_WORLD, one per kind: MPI matches nonblocking collectives
// by the order they are started on a communicator, and a two-phase exchange (fp8_allreduce.h)
// starts its second phase when its first completes, which is not at the same point of the
// program on every rank. Open MPI's nonblocking collectives only advance inside MPI calls, so a
// caller overlapping them with compute must call Test now and then (GradBuckets does, between
// layers). MPI guarantees every rank receives the same reduced values, so parameters updated from
// them stay bitwise identical.
#pragma once

#include <mpi.h>

#include <list>
#include <string>
#include <utility>
#include <vector>

#include "engine/dist/communicator.h"

namespace engine {

class MpiCommunicator final : public Communicator {
 public:
  // Collective over MPI_COMM_WORLD (it duplicates it): every rank constructs one together.
  MpiCommunicator();
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  // Collectives still in flight at destruction are waited for: their buffers may be freed next.
  ~MpiCommunicator() override;
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void AllreduceMean(float* data, size_t n) override;
  double AllreduceSum(double x) override;
  double AllreduceMax(double x) override;
  CollectiveId StartAllreduceSum(float* data, size_t n) override;
  CollectiveId StartAllreduceSum(double* data, size_t n) override;
  CollectiveId StartAlltoallBytes(const uint8_t* send, uint8_t* recv,
                                  size_t bytes_per_rank) override;
  CollectiveId StartAllgatherBytes(const uint8_t* send, uint8_t* recv,
                                   size_t bytes_per_rank) override;
  bool Test(CollectiveId id) override;
  void Wait(CollectiveId id) override;
  void BroadcastBytes(std::string* bytes, int root) override;
  void GatherFloats(const float* mine, size_t n, std::vector<float>* all, int root) override;
  // MPI_Comm_split of this communicator; the new one owns its MPI communicator.
  std::unique_ptr<Communicator> Split(int color) override;
  // MPI_Isend / MPI_Iprobe + MPI_Recv on a duplicate of this communicator, so no message can
  // match a collective's traffic.
  void SendBytes(int dest, int tag, std::string bytes) override;
  bool TryReceiveBytes(int tag, std::string* bytes, int* source) override;
  void FlushSends() override;

 private:
  // Over `comm`, which it owns (MPI_Comm_free at destruction).
  explicit MpiCommunicator(MPI_Comm comm);
  void CompleteSends(bool wait);
  CollectiveId Start(void* data, size_t n, MPI_Datatype type);
  MPI_Request* FreeSlot(size_t n, const char* what);
  MPI_Request& Slot(CollectiveId id);

  int rank_ = 0;
  int world_size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;      // the collectives' (a duplicate of the world, or a split)
  std::vector<MPI_Request> requests_;  // MPI_REQUEST_NULL: free slot
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  std::list<std::pair<MPI_Request, std::string>> sends_;  // in flight, with their buffers
  MPI_Comm alltoall_comm_ = MPI_COMM_NULL;
  MPI_Comm allgather_comm_ = MPI_COMM_NULL;
};

}  // namespace engine
